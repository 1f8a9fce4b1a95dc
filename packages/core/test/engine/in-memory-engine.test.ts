import { AceMq, InMemoryTransport } from '../../src/index.js'
import { engineScenarios } from '../../../../test-support/engine-scenarios.js'

let transport: InMemoryTransport

engineScenarios('the in-memory transport', {
  async connect() {
    transport = new InMemoryTransport()
    return AceMq.connect(transport)
  },
  async probe() {
    const t = transport
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
})
