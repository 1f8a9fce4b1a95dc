import { describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { replayScenarios, AMQP_URL, requireRabbit } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('replay on RabbitMQ', () => {
  replayScenarios('AmqpTransport (RabbitMQ)', amqpScenarioTarget(AMQP_URL, 'acemq-replay'))
})
