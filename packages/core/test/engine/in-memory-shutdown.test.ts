import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'
import { shutdownScenarios } from '../../../../test-support/shutdown-scenarios.js'

shutdownScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
