import { InMemoryTransport } from '@acemq/core'
import { inMemoryTarget, orderedScenarios } from '@acemq/testing'

orderedScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
