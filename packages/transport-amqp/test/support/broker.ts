import net from 'node:net'
import {
  holdBrokerFaultLock as holdLock,
  rabbitmqctl,
} from '../../../../test-support/broker-faults.js'
import { AMQP_URL } from '../../../../test-support/services.js'

/** A queue as `rabbitmqctl list_queues --formatter json` shows it: arguments keep their AMQP types. */
export interface ListedQueue {
  readonly name: string
  readonly type: string
  readonly durable: boolean
  /** `[name, amqp type, value]`, e.g. `['x-message-ttl', 'long', 40000]`. */
  readonly arguments: readonly (readonly [string, string, unknown])[]
}

/**
 * A virtual host of its own for one test file: `close_all_connections --vhost` then severs only
 * this suite's connections (never other suites' on the same broker), and deleting it at the end
 * removes anything a failed test left behind.
 */
export class TestVhost {
  private constructor(readonly name: string) {}

  static async create(): Promise<TestVhost> {
    const name = `acemq-transport-test-${Math.random().toString(36).slice(2, 10)}`
    await rabbitmqctl('add_vhost', name)
    await rabbitmqctl('set_permissions', '--vhost', name, 'guest', '.*', '.*', '.*')
    return new TestVhost(name)
  }

  /** `AMQP_URL` pointed at this vhost. */
  get url(): string {
    const url = new URL(AMQP_URL)
    url.pathname = `/${encodeURIComponent(this.name)}`
    return url.toString()
  }

  async queues(): Promise<ListedQueue[]> {
    const out = await rabbitmqctl(
      'list_queues',
      '--vhost',
      this.name,
      'name',
      'arguments',
      'type',
      'durable',
      '--formatter',
      'json',
      '--quiet',
    )
    return JSON.parse(out) as ListedQueue[]
  }

  async queue(name: string): Promise<ListedQueue | undefined> {
    return (await this.queues()).find((queue) => queue.name === name)
  }

  /** `messages_ready` and `messages_unacknowledged` of one queue. */
  async counts(name: string): Promise<{ ready: number; unacked: number } | undefined> {
    const out = await rabbitmqctl(
      'list_queues',
      '--vhost',
      this.name,
      'name',
      'messages_ready',
      'messages_unacknowledged',
      '--formatter',
      'json',
      '--quiet',
    )
    const row = (
      JSON.parse(out) as { name: string; messages_ready: number; messages_unacknowledged: number }[]
    ).find((queue) => queue.name === name)
    return row === undefined
      ? undefined
      : { ready: row.messages_ready, unacked: row.messages_unacknowledged }
  }

  /** The prefetch count of every consumer on `queue`. */
  async consumerPrefetch(queue: string): Promise<number[]> {
    const out = await rabbitmqctl(
      'list_consumers',
      '--vhost',
      this.name,
      'queue_name',
      'prefetch_count',
      '--formatter',
      'json',
      '--quiet',
    )
    return (JSON.parse(out) as { queue_name: string; prefetch_count: number }[])
      .filter((row) => row.queue_name === queue)
      .map((row) => row.prefetch_count)
  }

  /** Client-provided names of the connections open on this vhost. */
  async connectionNames(): Promise<string[]> {
    return (await this.connections()).map((connection) => connection.name)
  }

  /** The connections open on this vhost: client-provided name and negotiated heartbeat (s). */
  async connections(): Promise<{ name: string; heartbeat: number }[]> {
    const out = await rabbitmqctl(
      'list_connections',
      'vhost',
      'timeout',
      'client_properties',
      '--formatter',
      'json',
      '--quiet',
    )
    const rows = JSON.parse(out) as {
      vhost: string
      timeout: number
      client_properties: unknown[]
    }[]
    return rows
      .filter((row) => row.vhost === this.name)
      .map((row) => {
        const entry = row.client_properties.find(
          (property) => Array.isArray(property) && property[0] === 'connection_name',
        ) as unknown[] | undefined
        return { name: String(entry?.[2] ?? ''), heartbeat: row.timeout }
      })
  }

  /** Forces every connection on this vhost closed, as an operator or a broker restart would. */
  async closeAllConnections(): Promise<void> {
    await rabbitmqctl('close_all_connections', '--vhost', this.name, 'acemq test: forced close')
  }

  async delete(): Promise<void> {
    await rabbitmqctl('delete_vhost', this.name).catch(() => undefined)
  }
}

/**
 * A TCP proxy in front of the broker that records every byte the broker sends, so a test can
 * look at the exact AMQP encoding of a header (amqplib decodes every integer width to a number).
 */
export class RecordingProxy {
  readonly #server: net.Server
  readonly #sockets = new Set<net.Socket>()
  readonly #received: Buffer[] = []

  private constructor(server: net.Server) {
    this.#server = server
  }

  static async start(): Promise<RecordingProxy> {
    const target = new URL(AMQP_URL)
    const server = net.createServer()
    const proxy = new RecordingProxy(server)
    server.on('connection', (client) => {
      const upstream = net.connect({ host: target.hostname, port: Number(target.port || 5672) })
      proxy.#sockets.add(client)
      proxy.#sockets.add(upstream)
      client.pipe(upstream)
      upstream.on('data', (chunk: Buffer) => proxy.#received.push(chunk))
      upstream.pipe(client)
      const end = (): void => {
        client.destroy()
        upstream.destroy()
      }
      client.on('error', end)
      upstream.on('error', end)
      client.on('close', end)
      upstream.on('close', end)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const address = this.#server.address() as net.AddressInfo
    const parsed = new URL(url)
    parsed.hostname = '127.0.0.1'
    parsed.port = String(address.port)
    return parsed.toString()
  }

  /** Everything the broker has sent so far. */
  received(): Buffer {
    return Buffer.concat(this.#received)
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}

/** The AMQP field-table encoding of a key followed by a value's type tag: `<len><key><tag>`. */
export function fieldTag(key: string, tag: string): Buffer {
  return Buffer.concat([Buffer.from([Buffer.byteLength(key)]), Buffer.from(key), Buffer.from(tag)])
}

export { LOCK_WAIT_TIMEOUT } from '../../../../test-support/broker-faults.js'

/**
 * Holds the shared broker-fault lock until the returned function is called. Suites that
 * publish and measure take it for their whole run, so a memory alarm raised by a disruptive
 * test running at the same time (another package, another engineer) cannot block them.
 */
export async function holdBrokerFaultLock(): Promise<() => Promise<void>> {
  const lock = await holdLock()
  return () => lock.release()
}
