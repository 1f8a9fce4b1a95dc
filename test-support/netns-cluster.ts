import { execFile, execFileSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { skippingMissingServices } from '@acemq/testing'
import { accepts, lastLog, nodeFilesEnv, orphanRecords } from './rabbitmq-node.js'

const exec = promisify(execFile)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** How the cluster reacts to a partition: RabbitMQ's `cluster_partition_handling`. */
export type PartitionHandling = 'pause_minority' | 'autoheal' | 'ignore'

/** Options for {@link startNetnsCluster}. */
export interface NetnsClusterOptions {
  /** How many nodes (3). */
  readonly size?: number
  /** `cluster_partition_handling` (`pause_minority`, the choice docs/design.md §29 gives). */
  readonly partitionHandling?: PartitionHandling
  /** Erlang's `net_ticktime` in seconds: a peer cut off is noticed in 0.75–1.25 of it (10). */
  readonly netTicktime?: number
  /** How long the whole start may take before it is abandoned (and cleaned up). */
  readonly startTimeoutMs?: number
}

/** One node of a {@link NetnsCluster}, in a network namespace of its own. */
export interface NetnsNode {
  /** `rabbit@<peer address>`. */
  readonly name: string
  /** Its address on the peer network (node names and Erlang distribution). */
  readonly peerAddress: string
  /** Its address on the client network (where clients on the host connect). */
  readonly clientAddress: string
  /** `amqp://guest:guest@<client address>:5672`. */
  readonly url: string
  /** Runs `rabbitmqctl -n <node>` inside the node's namespace. */
  ctl(...args: string[]): Promise<string>
}

/**
 * Three RabbitMQ nodes, each in a network namespace of its own with two links: one to a
 * "peer" bridge that carries the cluster's own traffic (node names are on it), one to a
 * "client" bridge the host has an address on (clients connect there). Taking one of a node's
 * host-side link ends down partitions it from its peers, from the clients, or both.
 */
export interface NetnsCluster {
  readonly nodes: readonly NetnsNode[]
  /** Every node's URL, in the nodes' order. */
  readonly urls: readonly string[]
  /** The run's unique id (in every namespace, link and folder name). */
  readonly id: string
  /** The node whose client address is in `url` (or a description of it). */
  nodeAt(url: string): NetnsNode
  /** The node leading quorum queue `queue`, as a node that can answer says. */
  leaderOf(queue: string): Promise<NetnsNode>
  /** Cuts node `i` from its peers (its clients still reach it). */
  cutFromPeers(i: number): Promise<void>
  /** Cuts node `i` from every client (it stays in the cluster). */
  cutFromClients(i: number): Promise<void>
  /** Cuts node `i` from everything: peers and clients. */
  isolate(i: number): Promise<void>
  /** Puts every link of node `i` (or of every node) back up. */
  heal(i?: number): Promise<void>
  /** Waits until every node runs and sees every other as running. */
  awaitHealed(timeoutMs?: number): Promise<void>
  /**
   * Kills node `i`'s VM and everything else in its namespace (SIGKILL) and boots it again on
   * its data: for a node stuck after a heal, as an operator would restart it.
   */
  restart(i: number): Promise<void>
  /** `cluster_status`'s partitions as node `i` sees them (`{}` when none). */
  partitions(i: number): Promise<Record<string, string[]>>
  /** Stops the nodes, kills what is left in the namespaces, removes them, the links and bridges. */
  stop(): Promise<void>
}

/** Where each run's resources are recorded, so a run that died is cleaned up by the next. */
const REGISTRY = path.join(os.tmpdir(), 'acemq-netns')
const PREFIX = 'acemq'

interface Resources {
  owner: number
  namespaces: string[]
  links: string[]
  dirs: string[]
}

async function ip(...args: string[]): Promise<string> {
  return (await exec('ip', args, { timeout: 15_000 })).stdout
}

/** Runs `fn`; never throws (clean-up steps must all run). */
async function quietly(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn()
  } catch {
    // Already gone, or never made.
  }
}

/** Kills every process in namespace `ns`, deletes it, its links and its folders. */
async function release(resources: Resources): Promise<void> {
  for (const ns of resources.namespaces) {
    // RabbitMQ stops on SIGTERM; epmd and the rest are killed after a moment.
    const pids = async (): Promise<number[]> =>
      (await ip('netns', 'pids', ns).catch(() => ''))
        .split('\n')
        .map(Number)
        .filter((pid) => Number.isInteger(pid) && pid > 0)
    for (const pid of await pids()) await quietly(async () => process.kill(pid, 'SIGTERM'))
    const deadline = Date.now() + 10_000
    while ((await pids()).length > 0 && Date.now() < deadline) await sleep(100)
    for (const pid of await pids()) await quietly(async () => process.kill(pid, 'SIGKILL'))
    await quietly(() => ip('netns', 'del', ns))
  }
  for (const link of resources.links) await quietly(() => ip('link', 'del', link))
  for (const dir of resources.dirs) fs.rmSync(dir, { recursive: true, force: true })
}

/** Cleans up after runs whose process died without doing it. */
export async function reapOrphans(): Promise<void> {
  for (const [id, resources] of orphanRecords<Resources>(REGISTRY)) {
    await release(resources)
    fs.rmSync(path.join(REGISTRY, `${id}.json`), { force: true })
  }
}

/** This library's namespaces on the machine (`acemq-…`), whoever made them. */
export async function leftoverNamespaces(): Promise<string[]> {
  return (await ip('netns', 'list'))
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(`${PREFIX}-`))
}

/** Subnets `10.a.b.0/24` already routed on this machine. */
async function usedSubnets(): Promise<Set<string>> {
  const routes = await ip('-4', 'route', 'show', 'table', 'all')
  return new Set([...routes.matchAll(/\b10\.(\d+)\.(\d+)\./g)].map((m) => `${m[1]}.${m[2]}`))
}

/** Whether this process may make namespaces (root, and `ip netns` present). */
export async function canMakeNamespaces(): Promise<boolean> {
  if (process.getuid?.() !== 0) return false
  try {
    await ip('netns', 'list')
    return true
  } catch {
    return false
  }
}

/**
 * True when this process may make network namespaces. When it may not, this throws, so the
 * tests that need them fail — unless `ACEMQ_SKIP_SERVICES=1` outside CI (`@acemq/testing`'s
 * rule for a missing service), when it says why and answers false.
 */
export async function requireNamespaces(): Promise<boolean> {
  if (await canMakeNamespaces()) return true
  const reason = 'network namespaces need root and `ip netns` (iproute2)'
  if (!skippingMissingServices())
    throw new Error(`${reason}: the partition tests fail without them`)
  console.warn(`ACEMQ_SKIP_SERVICES=1: skipping the partition tests: ${reason}`)
  return false
}

/**
 * Starts three clustered RabbitMQ nodes in network namespaces of their own (see
 * {@link NetnsCluster}); names, addresses and folders are unique to the run, and the main
 * broker is never touched. Needs root. Measured here: about 20 s. Always
 * {@link NetnsCluster.stop} it in an `afterAll`; a run killed before that is cleaned up by
 * the next one (and by this process's exit hook).
 */
export async function startNetnsCluster(options: NetnsClusterOptions = {}): Promise<NetnsCluster> {
  await reapOrphans()
  const size = options.size ?? 3
  const id = crypto.randomBytes(3).toString('hex')
  const used = await usedSubnets()
  let peerNet = ''
  let clientNet = ''
  while (peerNet === '' || clientNet === '' || peerNet === clientNet) {
    const pick = (): string => `${crypto.randomInt(16, 250)}.${crypto.randomInt(1, 250)}`
    peerNet = pick()
    clientNet = pick()
    if (used.has(peerNet) || used.has(clientNet)) peerNet = ''
  }
  // Interface names are at most 15 characters.
  const peerBridge = `aq${id}p`
  const clientBridge = `aq${id}c`
  const resources: Resources = { owner: process.pid, namespaces: [], links: [], dirs: [] }
  fs.mkdirSync(REGISTRY, { recursive: true })
  const record = path.join(REGISTRY, `${id}.json`)
  const save = (): void => fs.writeFileSync(record, JSON.stringify(resources))
  const onExit = (): void => {
    // Synchronous last resort: the namespaces' processes die with their namespace's removal
    // only if killed, so do what can be done without awaiting.
    releaseSync(resources)
    fs.rmSync(record, { force: true })
  }
  // A signal ends Node without its 'exit' event: a run stopped by Ctrl-C or killed by CI's
  // `timeout` (SIGTERM to its whole process group) cleans up first, then dies of the signal
  // (unless something else listens for it: that listener has heard it and decides).
  const onSignal = (signal: NodeJS.Signals): void => {
    onExit()
    removeHooks()
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
  }
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
  const removeHooks = (): void => {
    process.removeListener('exit', onExit)
    for (const signal of signals) process.removeListener(signal, onSignal)
  }
  process.once('exit', onExit)
  for (const signal of signals) process.once(signal, onSignal)
  let stopped = false
  const stop = async (): Promise<void> => {
    if (stopped) return
    stopped = true
    removeHooks()
    await release(resources)
    fs.rmSync(record, { force: true })
  }

  const hostLinks: { peer: string; client: string }[] = []
  const nodes: NetnsNode[] = []
  const namespaces: string[] = []
  try {
    for (const [bridge, subnet] of [
      [peerBridge, peerNet],
      [clientBridge, clientNet],
    ] as const) {
      resources.links.push(bridge)
      save()
      await ip('link', 'add', bridge, 'type', 'bridge')
      if (bridge === clientBridge) await ip('addr', 'add', `10.${subnet}.1/24`, 'dev', bridge)
      await ip('link', 'set', bridge, 'up')
    }
    const names = Array.from({ length: size }, (_, i) => `rabbit@10.${peerNet}.${11 + i}`)
    for (let i = 0; i < size; i++) {
      const ns = `${PREFIX}-${id}-${i}`
      resources.namespaces.push(ns)
      save()
      await ip('netns', 'add', ns)
      namespaces.push(ns)
      await ip('-n', ns, 'link', 'set', 'lo', 'up')
      const links = { peer: `aq${id}p${i}`, client: `aq${id}c${i}` }
      hostLinks.push(links)
      for (const [kind, bridge, subnet] of [
        ['peer', peerBridge, peerNet],
        ['client', clientBridge, clientNet],
      ] as const) {
        const host = links[kind]
        const inside = `${host}x`
        resources.links.push(host)
        save()
        await ip('link', 'add', host, 'type', 'veth', 'peer', 'name', inside)
        await ip('link', 'set', host, 'master', bridge)
        await ip('link', 'set', host, 'up')
        await ip('link', 'set', inside, 'netns', ns)
        await ip('-n', ns, 'addr', 'add', `10.${subnet}.${11 + i}/24`, 'dev', inside)
        await ip('-n', ns, 'link', 'set', inside, 'up')
      }
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${PREFIX}-netns-${id}-${i}-`))
      resources.dirs.push(dir)
      save()
      nodes.push(
        makeNode(ns, names[i] as string, `10.${peerNet}.${11 + i}`, `10.${clientNet}.${11 + i}`),
      )
      writeNodeFiles(dir, names, options)
    }

    /** Boots node `i` (its VM, epmd and the rest run in its namespace) and waits for AMQP. */
    const boot = async (i: number, until: number): Promise<void> => {
      const node = nodes[i] as NetnsNode
      const dir = resources.dirs[i] as string
      if (process.getuid?.() === 0) await exec('chown', ['-R', 'rabbitmq:rabbitmq', dir])
      await exec('ip', ['netns', 'exec', namespaces[i] as string, 'rabbitmq-server', '-detached'], {
        env: nodeEnv(dir, node.name),
        timeout: 60_000,
      })
      while (!(await accepts(5672, node.clientAddress))) {
        if (Date.now() > until) {
          throw new Error(`${node.name} never accepted connections\n${lastLog(dir)}`)
        }
        await sleep(200)
      }
    }
    // Boot every node at once: each waits for the others through classic_config discovery.
    const deadline = Date.now() + (options.startTimeoutMs ?? 120_000)
    await Promise.all(nodes.map((_, i) => boot(i, deadline)))

    const cluster: NetnsCluster = {
      nodes,
      urls: nodes.map((node) => node.url),
      id,
      nodeAt(url) {
        const node = nodes.find((candidate) => url.includes(`${candidate.clientAddress}:`))
        if (node === undefined) throw new Error(`no node of the cluster is at ${url}`)
        return node
      },
      async leaderOf(queue) {
        // `--local`: a listing of the whole cluster has every node send its rows to the CLI's
        // own node, which they cannot reach from their namespaces (it hangs). A quorum queue
        // is listed by the node of its leader.
        for (const node of nodes) {
          try {
            const rows = JSON.parse(
              await node.ctl(
                'list_queues',
                'name',
                'leader',
                '--local',
                '--formatter',
                'json',
                '--quiet',
              ),
            ) as { name: string; leader: string }[]
            const leader = nodes.find((n) => n.name === rows.find((r) => r.name === queue)?.leader)
            if (leader !== undefined) return leader
          } catch {
            // Paused or cut off: ask the next.
          }
        }
        throw new Error(`no leader found for queue '${queue}'`)
      },
      cutFromPeers: (i) => linkState([hostLinks[i]?.peer], 'down'),
      cutFromClients: (i) => linkState([hostLinks[i]?.client], 'down'),
      isolate: (i) => linkState([hostLinks[i]?.peer, hostLinks[i]?.client], 'down'),
      heal: (i) =>
        linkState(
          (i === undefined ? hostLinks : [hostLinks[i]]).flatMap((l) => [l?.peer, l?.client]),
          'up',
        ),
      async awaitHealed(timeoutMs = 120_000) {
        const until = Date.now() + timeoutMs
        const seen: string[] = []
        for (;;) {
          const ok = await Promise.all(
            nodes.map(async (node, i) => {
              try {
                const status = JSON.parse(
                  await node.ctl('cluster_status', '--formatter', 'json'),
                ) as { running_nodes: string[]; partitions: Record<string, unknown> }
                const accepting = await accepts(5672, node.clientAddress)
                seen[i] =
                  `running ${status.running_nodes.join(',')} partitions ${JSON.stringify(status.partitions)} accepting ${accepting}`
                return (
                  names.every((name) => status.running_nodes.includes(name)) &&
                  Object.keys(status.partitions).length === 0 &&
                  accepting
                )
              } catch (error) {
                seen[i] = String(error).split('\n').slice(0, 3).join(' ')
                return false
              }
            }),
          )
          if (ok.every(Boolean)) return
          if (Date.now() > until) {
            throw new Error(
              `the cluster did not heal within ${timeoutMs} ms:\n${seen.map((line, i) => `  node ${i}: ${line}`).join('\n')}\n${resources.dirs.map((dir) => lastLog(dir)).join('\n')}`,
            )
          }
          await sleep(500)
        }
      },
      async restart(i) {
        const ns = namespaces[i] as string
        const pids = (await ip('netns', 'pids', ns)).split('\n').map(Number)
        for (const pid of pids) if (pid > 0) await quietly(async () => process.kill(pid, 'SIGKILL'))
        const until = Date.now() + 10_000
        while ((await ip('netns', 'pids', ns)).trim() !== '' && Date.now() < until) await sleep(100)
        await boot(i, Date.now() + 120_000)
      },
      async partitions(i) {
        const status = JSON.parse(
          await (nodes[i] as NetnsNode).ctl('cluster_status', '--formatter', 'json'),
        ) as { partitions: Record<string, string[]> }
        return status.partitions
      },
      stop,
    }
    await cluster.awaitHealed(Math.max(5_000, deadline - Date.now()))
    return cluster
  } catch (error) {
    await stop()
    throw error
  }
}

async function linkState(
  links: readonly (string | undefined)[],
  state: 'up' | 'down',
): Promise<void> {
  for (const link of links) {
    if (link === undefined) throw new Error('no such node')
    await ip('link', 'set', link, state)
  }
}

/** `ip` run synchronously (for the exit hook, where nothing can be awaited). */
function ipSync(args: string[]): string {
  return execFileSync('ip', args, { timeout: 5_000 }).toString()
}

/** {@link release} without awaiting: for the exit and signal hooks (SIGKILL, no grace). */
function releaseSync(resources: Resources): void {
  for (const ns of resources.namespaces) {
    try {
      const pids = ipSync(['netns', 'pids', ns]).split('\n').map(Number)
      for (const pid of pids) if (pid > 0) process.kill(pid, 'SIGKILL')
      ipSync(['netns', 'del', ns])
    } catch {
      // Gone.
    }
  }
  for (const link of resources.links) {
    try {
      ipSync(['link', 'del', link])
    } catch {
      // Gone.
    }
  }
  for (const dir of resources.dirs) fs.rmSync(dir, { recursive: true, force: true })
}

function nodeEnv(dir: string, name: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    RABBITMQ_USE_LONGNAME: 'true',
    RABBITMQ_NODENAME: name,
    ...nodeFilesEnv(dir),
  }
}

function writeNodeFiles(dir: string, names: readonly string[], options: NetnsClusterOptions): void {
  // Each namespace has its own ports: every node listens on 5672, 25672 and its own epmd.
  const config: Record<string, string> = {
    'listeners.tcp.1': '0.0.0.0:5672',
    loopback_users: 'none',
    cluster_partition_handling: options.partitionHandling ?? 'pause_minority',
    'cluster_formation.peer_discovery_backend': 'classic_config',
    ...Object.fromEntries(
      names.map((name, k) => [`cluster_formation.classic_config.nodes.${k + 1}`, name]),
    ),
  }
  fs.writeFileSync(
    path.join(dir, 'rabbitmq.conf'),
    Object.entries(config)
      .map(([key, value]) => `${key} = ${value}\n`)
      .join(''),
  )
  fs.writeFileSync(
    path.join(dir, 'advanced.config'),
    `[{kernel, [{net_ticktime, ${options.netTicktime ?? 10}}]}].\n`,
  )
  fs.writeFileSync(path.join(dir, 'enabled_plugins'), '[].\n')
  fs.writeFileSync(path.join(dir, 'rabbitmq-env.conf'), `USE_LONGNAME=true\n`)
  for (const sub of ['mnesia', 'log']) fs.mkdirSync(path.join(dir, sub))
}

function makeNode(ns: string, name: string, peerAddress: string, clientAddress: string): NetnsNode {
  return {
    name,
    peerAddress,
    clientAddress,
    url: `amqp://guest:guest@${clientAddress}:5672`,
    async ctl(...args) {
      const { stdout } = await exec(
        'ip',
        ['netns', 'exec', ns, 'rabbitmqctl', '-n', name, ...args],
        { env: { ...process.env, RABBITMQ_USE_LONGNAME: 'true' }, timeout: 15_000 },
      )
      return stdout
    },
  }
}
