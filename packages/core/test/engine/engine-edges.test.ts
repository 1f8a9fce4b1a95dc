import { InMemoryTransport } from '../../src/index.js'
import { edgeScenarios } from '../../../../test-support/edge-scenarios.js'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'

edgeScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
