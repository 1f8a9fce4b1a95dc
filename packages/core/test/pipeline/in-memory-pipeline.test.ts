import { describe } from 'vitest'
import { InMemoryTransport, type Transport } from '@acemq/core'
import { pipelineScenarios } from '../../../../test-support/pipeline-scenarios.js'

/** The in-memory transport's queues, looked at directly. */
const inMemory = {
  createTransport: (): Transport => new InMemoryTransport(),
  async probe(transport: Transport) {
    const t = transport as InMemoryTransport
    return {
      count: async (queue: string) => (t.hasQueue(queue) ? t.messageCount(queue) : undefined),
      async get(queue: string) {
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
      async sendRaw(
        queue: string,
        body: Uint8Array,
        properties: {
          readonly contentType?: string
          readonly messageId?: string
          readonly headers?: Record<string, unknown>
        },
      ) {
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
      deleteQueue: async (queue: string) => t.deleteQueue(queue),
      close: async () => undefined,
    }
  },
}

describe('a pipeline on the in-memory transport', () => {
  pipelineScenarios(inMemory)
})
