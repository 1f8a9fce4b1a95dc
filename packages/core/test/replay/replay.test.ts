import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'
import { replayScenarios } from '../../../../test-support/replay-scenarios.js'

replayScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
