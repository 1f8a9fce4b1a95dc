import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget, requestReplyScenarios } from '@acemq/testing'

requestReplyScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
