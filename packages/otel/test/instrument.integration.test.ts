import { afterAll, beforeAll, describe } from 'vitest'
import { AceMq } from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { holdBrokerFaultLock } from '../../../test-support/broker-faults.js'
import { AMQP_URL, requireRabbit } from '@acemq/testing'
import { otelScenarios } from './otel-scenarios.js'

const hasRabbit = await requireRabbit()

/** How long `beforeAll` may wait for the broker-fault lock while other suites hold it. */
const LOCK_WAIT_TIMEOUT = 300_000

describe.runIf(hasRabbit)('on RabbitMQ', () => {
  let admin: AmqpAdmin
  let releaseLock: (() => Promise<void>) | undefined

  beforeAll(async () => {
    const lock = await holdBrokerFaultLock()
    releaseLock = () => lock.release()
    admin = await AmqpAdmin.open()
  }, LOCK_WAIT_TIMEOUT)

  afterAll(async () => {
    await admin?.close()
    await releaseLock?.()
  })

  otelScenarios('RabbitMQ', {
    connect: () =>
      AceMq.connect(new AmqpTransport(AMQP_URL, { connectionName: 'acemq-otel-tests' })),
    deleteQueues: (queues) => admin.deleteQueues(...queues),
  })
})
