import amqplib from 'amqplib'
import { AMQP_URL } from '@acemq/testing'

/** A message as a test reads it back from a queue with `basic.get`. */
export interface GotMessage {
  readonly body: Buffer
  readonly headers: Record<string, unknown>
  readonly properties: amqplib.MessageProperties
}

/**
 * A plain amqplib connection for tests to look at the broker from outside the library:
 * count, read and delete queues, and publish raw messages.
 */
export class AmqpAdmin {
  private constructor(
    readonly connection: amqplib.ChannelModel,
    readonly channel: amqplib.ConfirmChannel,
  ) {}

  static async open(url = AMQP_URL): Promise<AmqpAdmin> {
    const connection = await amqplib.connect(url)
    const channel = await connection.createConfirmChannel()
    return new AmqpAdmin(connection, channel)
  }

  /** Messages ready in `queue`, or undefined when it does not exist. */
  async count(queue: string): Promise<number | undefined> {
    const channel = await this.connection.createChannel()
    channel.on('error', () => undefined)
    try {
      return (await channel.checkQueue(queue)).messageCount
    } catch {
      return undefined
    } finally {
      await channel.close().catch(() => undefined)
    }
  }

  /** Takes one message from `queue` (acked), or undefined when it is empty. */
  async get(queue: string): Promise<GotMessage | undefined> {
    const message = await this.channel.get(queue, { noAck: true })
    if (message === false) return undefined
    return {
      body: message.content,
      headers: (message.properties.headers ?? {}) as Record<string, unknown>,
      properties: message.properties,
    }
  }

  /** Waits until `queue` holds `count` ready messages, or throws after `timeoutMs`. */
  async waitForCount(queue: string, count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    let last: number | undefined
    while (Date.now() < deadline) {
      last = await this.count(queue)
      if (last === count) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error(
      `queue ${queue} held ${String(last)} messages, not ${count}, after ${timeoutMs} ms`,
    )
  }

  /** Publishes a raw message (confirmed) to the default exchange. */
  async sendRaw(queue: string, body: Buffer, options: amqplib.Options.Publish = {}): Promise<void> {
    this.channel.sendToQueue(queue, body, options)
    await this.channel.waitForConfirms()
  }

  /** Deletes queues (and their rungs, dead-letter and parked queues when asked to). */
  async deleteQueues(...queues: string[]): Promise<void> {
    for (const queue of queues) {
      const channel = await this.connection.createChannel()
      channel.on('error', () => undefined)
      await channel.deleteQueue(queue).catch(() => undefined)
      await channel.close().catch(() => undefined)
    }
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => undefined)
  }
}
