import { InMemoryTransport } from '../../src/index.js'
import { engineScenarios } from '../../../../test-support/engine-scenarios.js'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'

engineScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
