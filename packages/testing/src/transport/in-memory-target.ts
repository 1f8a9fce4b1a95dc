import type { InMemoryTransport } from '@acemq/core'
import type { Transport } from '@acemq/core/spi'
import type { ScenarioTarget } from './engine-scenarios.js'

/** The scenario target for the in-memory transport: the probe reads its queues directly. */
export function inMemoryTarget(create: () => InMemoryTransport): ScenarioTarget {
  return {
    createTransport: create,
    async probe(transport: Transport) {
      const t = transport as InMemoryTransport
      return {
        async count(queue) {
          return t.hasQueue(queue) ? t.messageCount(queue) : undefined
        },
        async get(queue) {
          const m = t.get(queue)
          return (
            m && {
              body: m.body,
              headers: m.headers,
              contentType: m.properties.contentType,
              messageId: m.properties.messageId,
            }
          )
        },
        async sendRaw(queue, body, properties) {
          await t.publish({
            exchange: '',
            routingKey: queue,
            body,
            headers: properties.headers ?? {},
            properties: {
              ...(properties.contentType ? { contentType: properties.contentType } : {}),
              ...(properties.messageId ? { messageId: properties.messageId } : {}),
            },
            persistent: true,
            mandatory: true,
          })
        },
        async deleteQueue(queue) {
          t.deleteQueue(queue)
        },
        async close() {},
      }
    },
  }
}
