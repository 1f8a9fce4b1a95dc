import { afterAll, beforeAll, describe } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { requireRabbit, transportParity } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

/**
 * The parity suite on RabbitMQ, in a virtual host of its own: the same assertions the
 * in-memory transport passes, so every rule it claims to share is checked against the broker.
 */
describe.runIf(hasRabbit)('the transport parity suite on AmqpTransport', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  // Publishes are refused on a blocked connection: keep broker alarms out meanwhile.
  let releaseLock: (() => Promise<void>) | undefined

  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-parity')
    admin = await AmqpAdmin.open(vhost.url)
  }, LOCK_WAIT_TIMEOUT)

  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
    await releaseLock?.()
  })

  transportParity('AmqpTransport (RabbitMQ)', {
    async connect() {
      const transport = new AmqpTransport(vhost.url, {
        connectionName: 'acemq-parity',
        recovery: { initialDelay: 100, maxDelay: 1_000 },
      })
      await transport.connect()
      return transport
    },
    readyCount: (_transport, queue) => admin.count(queue),
  })
})
