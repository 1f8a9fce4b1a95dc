import { InMemoryTransport } from '../../src/index.js'
import { deadLetterScenarios, inMemoryTarget } from '@acemq/testing'

deadLetterScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
