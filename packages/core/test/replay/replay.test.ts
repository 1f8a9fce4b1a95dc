import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget, replayScenarios } from '@acemq/testing'

replayScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
