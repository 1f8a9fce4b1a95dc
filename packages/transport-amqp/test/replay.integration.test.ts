import { describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { replayScenarios } from '../../../test-support/replay-scenarios.js'
import { AMQP_URL, requireRabbit } from '../../../test-support/services.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('replay on RabbitMQ', () => {
  replayScenarios('AmqpTransport (RabbitMQ)', amqpScenarioTarget(AMQP_URL, 'acemq-replay'))
})
