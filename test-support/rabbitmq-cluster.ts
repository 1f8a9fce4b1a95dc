import { startRabbitNode } from './rabbitmq-node.js'
import type { RabbitNode } from './rabbitmq-node.js'

/** Options for {@link startRabbitCluster}. */
export interface RabbitClusterOptions {
  /** The start of the nodes' names: `<prefix>-<i>-<random>@localhost`. */
  readonly prefix: string
  /** How many nodes (3). */
  readonly size?: number
  /** Extra `rabbitmq.conf` lines for every node. */
  readonly config?: Readonly<Record<string, string>>
}

/** A RabbitMQ cluster of extra nodes on this machine, beside (never joined to) the main broker. */
export interface RabbitCluster {
  readonly nodes: readonly RabbitNode[]
  /** Every node's `amqp://guest:guest@127.0.0.1:<port>`, in the nodes' order. */
  readonly urls: readonly string[]
  /** The node listening on the port of `url` (a URL, or a description with `***` for the password). */
  nodeAt(url: string): RabbitNode
  /** The node that leads quorum queue `queue` (on `vhost`). */
  leaderOf(queue: string, vhost?: string): Promise<RabbitNode>
  /** Waits until every node runs and is in the cluster (after a restart, say). */
  awaitAllRunning(timeoutMs?: number): Promise<void>
  /** Stops every node and removes their files. Never throws; safe to call twice. */
  stop(): Promise<void>
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Starts a cluster of `size` extra RabbitMQ nodes, each with its own name, AMQP and
 * distribution ports, config, data and log folders (see {@link startRabbitNode}); the main
 * broker is never touched. The nodes find each other through `classic_config` peer discovery:
 * the first boots alone, the others boot together and join it. Measured here: about 25 s for
 * three. Always {@link RabbitCluster.stop} it in an `afterAll`.
 *
 * @example
 * ```ts
 * const cluster = await startRabbitCluster({ prefix: 'acemq-cluster' })
 * try { await connect(cluster.urls) ... } finally { await cluster.stop() }
 * ```
 */
export async function startRabbitCluster(options: RabbitClusterOptions): Promise<RabbitCluster> {
  const size = options.size ?? 3
  const suffix = Math.random().toString(36).slice(2, 7)
  const names = Array.from({ length: size }, (_, i) => `${options.prefix}-${i}-${suffix}@localhost`)
  // The first node boots alone (a peer list would have it wait for peers not yet running);
  // the others find it through classic_config peer discovery and join it as they boot.
  const joining: Record<string, string> = {
    ...options.config,
    'cluster_formation.peer_discovery_backend': 'classic_config',
    'cluster_formation.classic_config.nodes.1': names[0] as string,
  }
  const started: RabbitNode[] = []
  const stop = async (): Promise<void> => {
    await Promise.all(started.map((node) => node.stop()))
  }
  try {
    const boot = async (name: string, config = joining): Promise<RabbitNode> => {
      const node = await startRabbitNode({ prefix: options.prefix, name, config })
      started.push(node)
      return node
    }
    const first = await boot(names[0] as string, { ...options.config })
    const rest = await Promise.all(names.slice(1).map((name) => boot(name)))
    const nodes = [first, ...rest]
    const cluster: RabbitCluster = {
      nodes,
      urls: nodes.map((node) => node.url),
      nodeAt(url) {
        const port = Number(/:(\d+)(?:[/?]|$)/.exec(url)?.[1])
        const node = nodes.find((candidate) => candidate.amqpPort === port)
        if (node === undefined) throw new Error(`no node of the cluster listens where ${url} is`)
        return node
      },
      async leaderOf(queue, vhost = '/') {
        for (const node of nodes) {
          if (node.pid() === undefined) continue
          const rows = JSON.parse(
            await node.ctl(
              'list_queues',
              '-p',
              vhost,
              'name',
              'leader',
              '--formatter',
              'json',
              '--quiet',
            ),
          ) as { name: string; leader: string }[]
          const leader = rows.find((row) => row.name === queue)?.leader
          const found = nodes.find((candidate) => candidate.name === leader)
          if (found !== undefined) return found
        }
        throw new Error(`no leader found for queue '${queue}'`)
      },
      async awaitAllRunning(timeoutMs = 60_000) {
        const deadline = Date.now() + timeoutMs
        for (;;) {
          try {
            const asked = nodes.find((node) => node.pid() !== undefined) ?? first
            const status = JSON.parse(await asked.ctl('cluster_status', '--formatter', 'json')) as {
              running_nodes: string[]
            }
            if (names.every((name) => status.running_nodes.includes(name))) return
          } catch (error) {
            if (Date.now() > deadline) throw error
          }
          if (Date.now() > deadline)
            throw new Error(`the cluster's nodes did not all run within ${timeoutMs} ms`)
          await sleep(250)
        }
      },
      stop,
    }
    await cluster.awaitAllRunning()
    return cluster
  } catch (error) {
    await stop()
    throw error
  }
}
