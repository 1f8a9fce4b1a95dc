import { afterAll, beforeAll, describe } from 'vitest'
import { requireRabbit } from '@acemq/testing'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import {
  claimCheckScenarios,
  encryptionScenarios,
  schemaScenarios,
} from '../../../test-support/payload-scenarios.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('payloads on AmqpTransport', () => {
  let vhost: BrokerVhost
  // Application publishes refuse on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-payload')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  // The target is created per scenario, after the vhost exists.
  const target = {
    createTransport: () => amqpScenarioTarget(vhost.url, 'acemq-payload').createTransport(),
    probe: (transport: Parameters<ReturnType<typeof amqpScenarioTarget>['probe']>[0]) =>
      amqpScenarioTarget(vhost.url, 'acemq-payload').probe(transport),
  }
  schemaScenarios('AmqpTransport (RabbitMQ)', target)
  encryptionScenarios('AmqpTransport (RabbitMQ)', target)
  claimCheckScenarios('AmqpTransport (RabbitMQ)', target)
})
