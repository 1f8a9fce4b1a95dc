import { describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { pipelineScenarios } from '../../../test-support/pipeline-scenarios.js'
import { AMQP_URL, requireRabbit } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('a pipeline on RabbitMQ', () => {
  pipelineScenarios(amqpScenarioTarget(AMQP_URL, 'pipeline-scenarios'))
})
