import { AmqpTransport } from '@acemq/transport-amqp'
import { AmqpAdmin } from './amqp-admin.js'
import type { ScenarioTarget } from '@acemq/testing'

/**
 * The shared scenarios' target on RabbitMQ: a transport with quick recovery, and a probe that
 * looks at the queues through a plain amqplib connection.
 */
export function amqpScenarioTarget(url: string, connectionName: string): ScenarioTarget {
  return {
    createTransport: () =>
      new AmqpTransport(url, { connectionName, recovery: { initialDelay: 100, maxDelay: 1_000 } }),
    async probe() {
      const admin = await AmqpAdmin.open(url)
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
}
