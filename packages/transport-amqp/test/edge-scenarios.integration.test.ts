import { afterAll, beforeAll, describe } from 'vitest'
import { edgeScenarios, AMQP_URL, requireRabbit } from '@acemq/testing'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the engine’s edge scenarios on AmqpTransport', () => {
  // Application publishes refuse on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await releaseLock?.()
  })

  edgeScenarios('AmqpTransport (RabbitMQ)', amqpScenarioTarget(AMQP_URL, 'acemq-edges'))
})
