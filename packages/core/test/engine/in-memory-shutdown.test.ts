import { InMemoryTransport } from '../../src/index.js'
import { inMemoryTarget, shutdownScenarios } from '@acemq/testing'

shutdownScenarios(
  'the in-memory transport',
  inMemoryTarget(() => new InMemoryTransport()),
)
