import { InMemoryTransport } from '@acemq/core'
import { inMemoryTarget, pipelineScenarios } from '@acemq/testing'

pipelineScenarios(
  'InMemoryTransport',
  inMemoryTarget(() => new InMemoryTransport()),
)
