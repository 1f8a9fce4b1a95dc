import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget, interceptorScenarios } from '@acemq/testing'

interceptorScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
