import { InMemoryTransport } from '../../src/index.js'
import { edgeScenarios, inMemoryTarget } from '@acemq/testing'

edgeScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
