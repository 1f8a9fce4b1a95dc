import { InMemoryTransport } from '../../src/index.js'
import { idempotencyScenarios, inMemoryTarget } from '@acemq/testing'

idempotencyScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
