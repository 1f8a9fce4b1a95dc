import { afterAll, beforeAll, describe } from 'vitest'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { outboxScenarios, requireRabbit } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the outbox relay on RabbitMQ', () => {
  let vhost: BrokerVhost
  // Application publishes refuse on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-outbox')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  outboxScenarios('AmqpTransport (RabbitMQ)', {
    createTransport: () => amqpScenarioTarget(vhost.url, 'acemq-outbox').createTransport(),
    probe: (transport) => amqpScenarioTarget(vhost.url, 'acemq-outbox').probe(transport),
  })
})
