import { InMemoryTransport } from '../src/index.js'
import { inMemoryTarget } from '@acemq/testing'
import {
  claimCheckScenarios,
  encryptionScenarios,
  schemaScenarios,
} from '../../../test-support/payload-scenarios.js'

schemaScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)

encryptionScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)

claimCheckScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
