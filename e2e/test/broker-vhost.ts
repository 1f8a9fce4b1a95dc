import { rabbitmqctl } from '../../test-support/broker-faults.js'
import { AMQP_URL } from '../../test-support/services.js'

/**
 * A RabbitMQ virtual host of its own for one test file. `closeAllConnections()` severs only the
 * connections on it (the test's and its child processes'), never those of other tests or
 * benchmarks running on the same broker, and deleting it removes every queue a test left.
 */
export class BrokerVhost {
  private constructor(readonly name: string) {}

  static async create(prefix: string): Promise<BrokerVhost> {
    const name = `${prefix}-${Math.random().toString(36).slice(2, 10)}`
    await rabbitmqctl('add_vhost', name)
    await rabbitmqctl('set_permissions', '--vhost', name, 'guest', '.*', '.*', '.*')
    return new BrokerVhost(name)
  }

  /** `AMQP_URL` pointed at this virtual host. */
  get url(): string {
    const url = new URL(AMQP_URL)
    url.pathname = `/${encodeURIComponent(this.name)}`
    return url.toString()
  }

  /**
   * `rabbitmqctl close_all_connections --vhost <name>`, as an operator or a network cut would.
   * Hold the broker-fault lock around it (`withBrokerFault`).
   */
  async closeAllConnections(): Promise<void> {
    await rabbitmqctl('close_all_connections', '--vhost', this.name, 'acemq e2e: forced close')
  }

  /** Ready and unacknowledged messages of every queue on this virtual host, by name. */
  async queues(): Promise<Map<string, { ready: number; unacked: number }>> {
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

  async delete(): Promise<void> {
    await rabbitmqctl('delete_vhost', this.name).catch(() => undefined)
  }
}
