import { afterAll, beforeAll, describe } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { engineScenarios } from '../../../test-support/engine-scenarios.js'
import type { ScenarioTarget } from '../../../test-support/engine-scenarios.js'
import { idempotencyScenarios } from '../../../test-support/idempotency-scenarios.js'
import { AMQP_URL, requireRabbit } from '../../../test-support/services.js'
import { shutdownScenarios } from '../../../test-support/shutdown-scenarios.js'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

/** The shared scenarios, on RabbitMQ: the probe looks at the queues through a plain amqplib connection. */
const amqp: ScenarioTarget = {
  createTransport: () =>
    new AmqpTransport(AMQP_URL, {
      connectionName: 'acemq-scenarios',
      recovery: { initialDelay: 100, maxDelay: 1_000 },
    }),
  async probe() {
    const admin = await AmqpAdmin.open(AMQP_URL)
    return {
      count: (queue) => admin.count(queue),
      async get(queue) {
        const got = await admin.get(queue)
        return (
          got && {
            body: got.body,
            headers: got.headers,
            contentType: got.properties.contentType as string | undefined,
            messageId: got.properties.messageId as string | undefined,
          }
        )
      },
      async sendRaw(queue, body, properties) {
        await admin.sendRaw(queue, Buffer.from(body), {
          ...(properties.contentType ? { contentType: properties.contentType } : {}),
          ...(properties.messageId ? { messageId: properties.messageId } : {}),
          ...(properties.headers ? { headers: properties.headers } : {}),
          persistent: true,
        })
      },
      deleteQueue: (queue) => admin.deleteQueues(queue),
      close: () => admin.close(),
    }
  },
}

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
})
