import { describe } from 'vitest'
import { InMemoryTransport } from '@acemq/core'
import { inMemoryTarget } from '@acemq/testing'
import { pipelineScenarios } from '../../../../test-support/pipeline-scenarios.js'

describe('a pipeline on the in-memory transport', () => {
  pipelineScenarios(inMemoryTarget(() => new InMemoryTransport()))
})
