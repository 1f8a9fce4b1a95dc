import { afterAll, beforeAll, describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import {
  deadLetterScenarios,
  engineScenarios,
  idempotencyScenarios,
  interceptorScenarios,
  AMQP_URL,
  requireRabbit,
  shutdownScenarios,
} from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

/** The shared scenarios, on RabbitMQ: the probe looks at the queues through a plain amqplib connection. */
const amqp = amqpScenarioTarget(AMQP_URL, 'acemq-scenarios')

describe.runIf(hasRabbit)('the shared scenarios on AmqpTransport', () => {
  // Application publishes refuse on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await releaseLock?.()
  })

  engineScenarios('AmqpTransport (RabbitMQ)', amqp)
  shutdownScenarios('AmqpTransport (RabbitMQ)', amqp)
  idempotencyScenarios('AmqpTransport (RabbitMQ)', amqp)
  interceptorScenarios('AmqpTransport (RabbitMQ)', amqp)
  deadLetterScenarios('AmqpTransport (RabbitMQ)', amqp)
})
