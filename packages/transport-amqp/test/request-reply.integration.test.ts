import { describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { requestReplyScenarios, AMQP_URL, requireRabbit } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('request/reply on RabbitMQ', () => {
  requestReplyScenarios('AmqpTransport (RabbitMQ)', amqpScenarioTarget(AMQP_URL, 'acemq-rpc'))
})
