import amqplib, { type ChannelModel, type ConfirmChannel, type Options } from 'amqplib'
import { AMQP_URL } from './config.js'
import { acemqShapedMessage } from './messages.js'

/** Runs `send(i)` for i in [0, count) with at most `window` of them outstanding at any time. */
export function windowed(
  count: number,
  window: number,
  send: (i: number) => Promise<unknown>,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let next = 0
    let inFlight = 0
    let done = 0
    let failed = false
    if (count === 0) {
      resolve()
      return
    }
    const pump = (): void => {
      while (!failed && inFlight < window && next < count) {
        const i = next++
        inFlight++
        send(i).then(
          () => {
            inFlight--
            if (++done === count) resolve()
            else pump()
          },
          (error: unknown) => {
            failed = true
            reject(error)
          },
        )
      }
    }
    pump()
  })
}

/** Publishes on a confirm channel and resolves on the broker's confirm. */
export function confirmPublish(
  channel: ConfirmChannel,
  exchange: string,
  routingKey: string,
  content: Buffer,
  options: Options.Publish,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    channel.publish(exchange, routingKey, content, options, (error: unknown) => {
      if (error === null || error === undefined) resolve()
      else reject(error instanceof Error ? error : new Error(String(error)))
    })
  })
}

/** Unique, recognisable queue names; every one made is deleted by {@link Admin.cleanup}. */
let serial = 0
export function queueName(what: string): string {
  return `acemq-bench.${process.pid}.${what}.${++serial}`
}

/** The queue types a comparison may run on. */
export type QueueType = 'classic' | 'quorum'

interface AdminConnection {
  readonly model: ChannelModel
  readonly channel: ConfirmChannel
  readonly version: string
}

const ignore = (): void => undefined

/**
 * The benchmark's own connection to the broker, outside every measurement: declares the
 * queues, fills them, reads their depth and deletes them (with the `.dlq` and `.parked` queues
 * an `@acemq` consumer declares next to them). It reconnects on its next use after the broker
 * dropped it (a test suite on the same machine may restart the broker).
 */
export class Admin {
  #connection: Promise<AdminConnection> | undefined
  #serverVersion = 'unknown'
  readonly #made = new Set<string>()
  readonly #url: string

  private constructor(url: string) {
    this.#url = url
  }

  /** Opens the admin connection to the broker at `url` (the main one by default). */
  static async open(url = AMQP_URL): Promise<Admin> {
    const admin = new Admin(url)
    await admin.#channel()
    return admin
  }

  get serverVersion(): string {
    return this.#serverVersion
  }

  async #channel(): Promise<ConfirmChannel> {
    const current = (this.#connection ??= this.#connect())
    try {
      return (await current).channel
    } catch (error) {
      if (this.#connection === current) this.#connection = undefined
      throw error
    }
  }

  async #connect(): Promise<AdminConnection> {
    const model = await amqplib.connect(this.#url, {
      clientProperties: { connection_name: 'acemq-bench admin' },
    })
    const version: unknown = model.connection.serverProperties['version']
    const channel = await model.createConfirmChannel()
    const connection: AdminConnection = {
      model,
      channel,
      version: typeof version === 'string' ? version : 'unknown',
    }
    this.#serverVersion = connection.version
    const forget = (): void => {
      void this.#connection?.then((c) => {
        if (c === connection) this.#connection = undefined
      }, ignore)
      model.close().catch(ignore)
    }
    model.on('error', ignore)
    model.on('close', forget)
    channel.on('error', ignore)
    channel.on('close', forget)
    return connection
  }

  /** Waits (up to `timeoutMs`) until the broker takes a connection again. */
  async waitForBroker(timeoutMs = 120_000): Promise<void> {
    const until = Date.now() + timeoutMs
    for (;;) {
      try {
        const channel = await this.#channel()
        await channel.checkExchange('amq.direct')
        return
      } catch (error) {
        if (Date.now() > until) throw error
        await new Promise((resolve) => setTimeout(resolve, 1_000))
      }
    }
  }

  /**
   * A durable classic queue without arguments: the same for every contestant; or a quorum
   * queue when `type` says so.
   */
  async queue(what: string, type: QueueType = 'classic'): Promise<string> {
    const name = queueName(what)
    this.#made.add(name)
    await (
      await this.#channel()
    ).assertQueue(name, {
      durable: true,
      ...(type === 'quorum' && { arguments: { 'x-queue-type': 'quorum' } }),
    })
    return name
  }

  /**
   * Fills `queue` with `count` messages shaped as `@acemq` publishes them, confirmed; with
   * `bytes`, bodies of that size (the order, padded).
   */
  async fill(queue: string, count: number, bytes?: number): Promise<void> {
    const channel = await this.#channel()
    await windowed(count, bytes !== undefined && bytes > 50_000 ? 20 : 1_000, (i) => {
      const { content, options } = acemqShapedMessage(i, queue, bytes)
      return confirmPublish(channel, '', queue, content, options)
    })
  }

  /** Messages ready in `queue`. */
  async depth(queue: string): Promise<number> {
    return (await (await this.#channel()).checkQueue(queue)).messageCount
  }

  /**
   * Deletes `queues` and whatever an `@acemq` consumer declared next to them. Never throws: a
   * queue that could not be deleted now is tried again by {@link Admin.close}.
   */
  async remove(...queues: string[]): Promise<void> {
    for (const queue of queues) {
      try {
        const channel = await this.#channel()
        for (const name of [queue, `${queue}.dlq`, `${queue}.parked`])
          await channel.deleteQueue(name)
        this.#made.delete(queue)
      } catch {
        // Kept in #made for close().
      }
    }
  }

  /** Deletes every queue still around, then closes. */
  async close(): Promise<void> {
    await this.remove(...this.#made)
    const connection = await this.#connection?.catch(() => undefined)
    this.#connection = undefined
    await connection?.model.close().catch(ignore)
  }
}
