import { inMemoryTarget, outboxScenarios } from '@acemq/testing'
import { InMemoryTransport } from '../../src/index.js'

outboxScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
