import { afterAll, beforeAll, describe } from 'vitest'
import { AceMq } from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { withBrokerFault } from '../../../test-support/broker-faults.js'
import { AMQP_URL, requireRabbit } from '../../../test-support/services.js'
import { otelScenarios } from './otel-scenarios.js'

const hasRabbit = await requireRabbit()

/** How long `beforeAll` may wait for the broker-fault lock while other suites hold it. */
const LOCK_WAIT_TIMEOUT = 300_000

/**
 * Holds the shared broker-fault lock until the returned function is called: a memory alarm
 * raised by a disruptive test elsewhere would block publishes and turn the counts this suite
 * checks into `refused`.
 */
async function holdBrokerFaultLock(): Promise<() => Promise<void>> {
  let acquired!: () => void
  let release!: () => void
  const isAcquired = new Promise<void>((resolve) => (acquired = resolve))
  const released = new Promise<void>((resolve) => (release = resolve))
  const held = withBrokerFault(async () => {
    acquired()
    await released
  })
  await isAcquired
  return async () => {
    release()
    await held
  }
}

describe.runIf(hasRabbit)('on RabbitMQ', () => {
  let admin: AmqpAdmin
  let releaseLock: (() => Promise<void>) | undefined

  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
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
