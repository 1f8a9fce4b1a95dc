import amqplib from 'amqplib'
import type { Headers, InMemoryTransport } from '@acemq/core'

/** A message read straight off a queue, as another team's tooling would see it. */
export interface RawMessage {
  readonly headers: Headers
  readonly body: Uint8Array
}

/**
 * A look at the queues from outside the library: how many messages wait in one, the next one
 * off a dead-letter queue, and deleting the demo's queues at the end. AceMQ itself never
 * needs this; the demo uses it to show where messages went.
 */
export interface QueueView {
  count(queue: string): Promise<number>
  take(queue: string): Promise<RawMessage | undefined>
  deleteQueues(queues: readonly string[]): Promise<void>
  close(): Promise<void>
}

/** The in-memory transport answers these questions itself. */
export function inMemoryView(transport: InMemoryTransport): QueueView {
  return {
    count: async (queue) => transport.messageCount(queue),
    take: async (queue) => transport.get(queue),
    deleteQueues: async (queues) => queues.forEach((queue) => transport.deleteQueue(queue)),
    close: async () => undefined,
  }
}

/** On RabbitMQ, a plain amqplib connection: `queue.declare passive`, `basic.get`, `queue.delete`. */
export async function rabbitView(url: string): Promise<QueueView> {
  const connection = await amqplib.connect(url)
  const channel = await connection.createChannel()
  return {
    count: async (queue) => (await channel.checkQueue(queue)).messageCount,
    take: async (queue) => {
      const message = await channel.get(queue, { noAck: true })
      if (message === false) return undefined
      return { headers: message.properties.headers ?? {}, body: message.content }
    },
    deleteQueues: async (queues) => {
      for (const queue of queues) await channel.deleteQueue(queue)
    },
    close: () => connection.close(),
  }
}
