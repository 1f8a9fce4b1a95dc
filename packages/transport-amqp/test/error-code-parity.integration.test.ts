import { afterAll, beforeAll, describe } from 'vitest'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { errorCodeParity, requireRabbit } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

/**
 * The error-code suite on RabbitMQ, in a virtual host of its own: the same failures reject
 * with the same codes as on the in-memory transport.
 */
describe.runIf(hasRabbit)('the error-code suite on AmqpTransport', () => {
  let vhost: BrokerVhost

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-codes')
  })

  afterAll(async () => {
    await vhost?.delete()
  })

  errorCodeParity('AmqpTransport (RabbitMQ)', {
    create: () =>
      new AmqpTransport(vhost.url, {
        connectionName: 'acemq-codes',
        recovery: { initialDelay: 100, maxDelay: 1_000 },
      }),
  })
})
