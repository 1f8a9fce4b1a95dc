import { freePort, startRabbitNode, type RabbitNode } from './rabbitmq-node.js'

/** An extra RabbitMQ node with the management plugin, and where its HTTP API listens. */
export interface ManagementNode {
  readonly node: RabbitNode
  /** `http://127.0.0.1:<port>`, without user information. */
  readonly managementUrl: string
  readonly managementPort: number
  /** Creates a user with every permission on `vhost` (`/` by default) and the given tags. */
  addUser(user: string, password: string, tags?: readonly string[], vhost?: string): Promise<void>
  /** Creates a virtual host open to `guest`. */
  addVhost(vhost: string): Promise<void>
  stop(): Promise<void>
}

/**
 * Starts an extra RabbitMQ node (see {@link startRabbitNode}) with `rabbitmq_management`
 * enabled on it alone, its HTTP API on a free loopback port, and queue statistics every 500 ms
 * instead of 5 s, so a test sees a count soon after it changes. The main broker is never
 * touched. Always {@link ManagementNode.stop} it in an `afterAll`.
 *
 * @example
 * ```ts
 * const mgmt = await startManagementNode('acemq-dlq-discovery')
 * try { await fetch(`${mgmt.managementUrl}/api/overview`, ...) } finally { await mgmt.stop() }
 * ```
 */
export async function startManagementNode(prefix: string): Promise<ManagementNode> {
  const managementPort = await freePort()
  const node = await startRabbitNode({
    prefix,
    plugins: ['rabbitmq_management'],
    config: {
      'management.tcp.ip': '127.0.0.1',
      'management.tcp.port': String(managementPort),
      collect_statistics_interval: '500',
    },
    startTimeoutMs: 90_000,
  })
  return {
    node,
    managementPort,
    managementUrl: `http://127.0.0.1:${managementPort}`,
    async addUser(user, password, tags = [], vhost = '/') {
      await node.ctl('add_user', user, password)
      if (tags.length > 0) await node.ctl('set_user_tags', user, ...tags)
      await node.ctl('set_permissions', '--vhost', vhost, user, '.*', '.*', '.*')
    },
    async addVhost(vhost) {
      await node.ctl('add_vhost', vhost)
      await node.ctl('set_permissions', '--vhost', vhost, 'guest', '.*', '.*', '.*')
    },
    stop: () => node.stop(),
  }
}
