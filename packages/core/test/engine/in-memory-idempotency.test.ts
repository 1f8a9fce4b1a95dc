import { InMemoryTransport } from '../../src/index.js'
import { idempotencyScenarios } from '../../../../test-support/idempotency-scenarios.js'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'

idempotencyScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
