import { InMemoryTransport } from '../../src/index.js'
import { engineScenarios, inMemoryTarget } from '@acemq/testing'

engineScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
