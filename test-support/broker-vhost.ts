import { rabbitmqctl } from './broker-faults.js'
import { AMQP_URL } from '@acemq/testing'

/** A queue as `rabbitmqctl list_queues --formatter json` shows it: arguments keep their AMQP types. */
export interface ListedQueue {
  readonly name: string
  readonly type: string
  readonly durable: boolean
  /** `[name, amqp type, value]`, e.g. `['x-message-ttl', 'long', 40000]`. */
  readonly arguments: readonly (readonly [string, string, unknown])[]
}

/**
 * A RabbitMQ virtual host of its own for one test file: `closeAllConnections()` severs only the
 * connections on it (the test's and its child processes'), never those of other tests or
 * benchmarks on the same broker, and deleting it at the end removes every queue a test left.
 */
export class BrokerVhost {
  private constructor(readonly name: string) {}

  /** A new virtual host named `{prefix}-{random}`, open to `guest`. */
  static async create(prefix: string): Promise<BrokerVhost> {
    const name = `${prefix}-${Math.random().toString(36).slice(2, 10)}`
    await rabbitmqctl('add_vhost', name)
    await rabbitmqctl('set_permissions', '--vhost', name, 'guest', '.*', '.*', '.*')
    return new BrokerVhost(name)
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

  /** Ready and unacknowledged messages of every queue on this virtual host, by name. */
  async queueCounts(): Promise<Map<string, { ready: number; unacked: number }>> {
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
    const rows = JSON.parse(out) as {
      name: string
      messages_ready: number
      messages_unacknowledged: number
    }[]
    return new Map(
      rows.map((row) => [
        row.name,
        { ready: row.messages_ready, unacked: row.messages_unacknowledged },
      ]),
    )
  }

  /** `messages_ready` and `messages_unacknowledged` of one queue. */
  async counts(name: string): Promise<{ ready: number; unacked: number } | undefined> {
    return (await this.queueCounts()).get(name)
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

  /**
   * Forces every connection on this vhost closed, as an operator, a broker restart or a network
   * cut would. Hold the broker-fault lock around it (`withBrokerFault`).
   */
  /** Whether queue `name` exists and holds no message, ready or unacknowledged. */
  async isEmpty(name: string): Promise<boolean> {
    const counts = (await this.queueCounts()).get(name)
    return counts !== undefined && counts.ready + counts.unacked === 0
  }

  async closeAllConnections(): Promise<void> {
    await rabbitmqctl('close_all_connections', '--vhost', this.name, 'acemq test: forced close')
  }

  async delete(): Promise<void> {
    await rabbitmqctl('delete_vhost', this.name).catch(() => undefined)
  }
}
