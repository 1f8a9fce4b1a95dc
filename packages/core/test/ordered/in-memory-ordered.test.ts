import { InMemoryTransport } from '@acemq/core'
import { inMemoryTarget } from '../../../../test-support/in-memory-target.js'
import { orderedScenarios } from '../../../../test-support/ordered-scenarios.js'

orderedScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
