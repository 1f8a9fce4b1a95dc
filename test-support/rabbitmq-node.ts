import { execFile } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Options for {@link startRabbitNode}. */
export interface RabbitNodeOptions {
  /** The start of the node's name; a random suffix keeps two runs apart. */
  readonly prefix: string
  /** Extra `rabbitmq.conf` lines, e.g. `{ consumer_timeout: '2000' }`. */
  readonly config?: Readonly<Record<string, string>>
  /** Settings of the `rabbit` application that only `advanced.config` takes, as Erlang terms. */
  readonly rabbitAdvanced?: Readonly<Record<string, string>>
  /** How long the node may take to boot. */
  readonly startTimeoutMs?: number
  /** The node's full name (`name@localhost`) instead of one made from `prefix`. */
  readonly name?: string
  /** The AMQP port instead of a free one (a node restarted by a test keeps its ports anyway). */
  readonly amqpPort?: number
  /** The Erlang distribution port instead of a free one. */
  readonly distPort?: number
  /** Plugins to enable, e.g. `['rabbitmq_auth_mechanism_ssl']`. */
  readonly plugins?: readonly string[]
  /**
   * Users besides `guest` with no password (so only a certificate login lets them in) and
   * every permission on `/`, created at boot from a definitions file.
   */
  readonly passwordlessUsers?: readonly string[]
}

/** A RabbitMQ node of its own, beside the main broker, with its own name, ports and data. */
export interface RabbitNode {
  /** `name@localhost`, for `rabbitmqctl -n`. */
  readonly name: string
  /** `amqp://guest:guest@127.0.0.1:<port>`. */
  readonly url: string
  /** The AMQP port on 127.0.0.1. */
  readonly amqpPort: number
  /** The node's folder (config, data, logs), removed by {@link RabbitNode.stop}. */
  readonly dir: string
  /** Runs `rabbitmqctl -n <node>` with `args`. */
  ctl(...args: string[]): Promise<string>
  /** The operating-system pid of the node's Erlang VM, while it runs. */
  pid(): number | undefined
  /**
   * Kills the node's Erlang VM with SIGKILL (`kill -9`), as a crashed machine would leave it,
   * and waits until its AMQP port refuses connections. Its data stays for {@link RabbitNode.start}.
   */
  kill(): Promise<void>
  /** Boots the node again (after {@link RabbitNode.kill}) on the same name, ports and data. */
  start(): Promise<void>
  /** Stops the node and removes its files. Never throws; safe to call twice. */
  stop(): Promise<void>
}

/** A TCP port free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether `host:port` accepts a TCP connection within a second. */
export function accepts(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port })
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/**
 * Where each running node is recorded (`<name>.json`: the test process that started it and
 * the node's folder), so a node whose test run was killed is ended by the next one.
 */
const REGISTRY = path.join(os.tmpdir(), 'acemq-rabbit-nodes')

/** Nodes this process started and has not stopped: killed if the process exits first. */
const running = new Map<string, string>()
let exitHookInstalled = false

function register(name: string, dir: string): void {
  fs.mkdirSync(REGISTRY, { recursive: true })
  fs.writeFileSync(path.join(REGISTRY, `${name}.json`), JSON.stringify({ owner: process.pid, dir }))
  running.set(name, dir)
  if (exitHookInstalled) return
  exitHookInstalled = true
  // A worker that exits without its afterAll (a crash, a timeout) must not leave nodes behind.
  process.once('exit', () => {
    for (const [node, folder] of running) killAndRemove(node, folder)
  })
}

function killAndRemove(name: string, dir: string): void {
  try {
    const pid = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8'))
    if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGKILL')
  } catch {
    // Never started, or already gone.
  }
  fs.rmSync(dir, { recursive: true, force: true })
  fs.rmSync(path.join(REGISTRY, `${name}.json`), { force: true })
  running.delete(name)
}

/**
 * The records in registry folder `dir` (`<key>.json` each) whose owner process has died:
 * `[key, record]`. Records being written or removed by another process are passed over.
 */
export function orphanRecords<T extends { owner: number }>(dir: string): [string, T][] {
  let entries: string[]
  try {
    entries = fs.readdirSync(dir)
  } catch {
    return []
  }
  const orphans: [string, T][] = []
  for (const entry of entries) {
    try {
      const record = JSON.parse(fs.readFileSync(path.join(dir, entry), 'utf8')) as T
      if (!alive(record.owner)) orphans.push([entry.replace(/\.json$/, ''), record])
    } catch {
      // Being written or removed by another process.
    }
  }
  return orphans
}

/** Ends the nodes of test runs that died without stopping them. */
function reapOrphans(): void {
  for (const [name, { dir }] of orphanRecords<{ owner: number; dir: string }>(REGISTRY)) {
    killAndRemove(name, dir)
  }
}

/** RabbitMQ's SHA-256 password hash: base64 of a 4-byte salt and sha256(salt + password). */
function passwordHash(password: string): string {
  const salt = crypto.randomBytes(4)
  const hash = crypto
    .createHash('sha256')
    .update(Buffer.concat([salt, Buffer.from(password)]))
    .digest()
  return Buffer.concat([salt, hash]).toString('base64')
}

/** Definitions imported at boot: `guest`/`guest` and the passwordless users, all on `/`. */
function definitions(passwordless: readonly string[]): unknown {
  const user = (name: string, hash: string): unknown => ({
    name,
    password_hash: hash,
    hashing_algorithm: 'rabbit_password_hashing_sha256',
    tags: name === 'guest' ? ['administrator'] : [],
  })
  const names = ['guest', ...passwordless]
  return {
    users: [user('guest', passwordHash('guest')), ...passwordless.map((name) => user(name, ''))],
    vhosts: [{ name: '/' }],
    permissions: names.map((name) => ({
      user: name,
      vhost: '/',
      configure: '.*',
      write: '.*',
      read: '.*',
    })),
  }
}

/** Whether process `pid` exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

/**
 * The variables that put a node's data, logs, pid file and config files in folder `dir` —
 * its own env file too, or the main broker's (which names the node `rabbit@localhost`) is read.
 */
export function nodeFilesEnv(dir: string): Record<string, string> {
  return {
    RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(dir, 'log'),
    RABBITMQ_PID_FILE: path.join(dir, 'pid'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
    RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: path.join(dir, 'advanced.config'),
    RABBITMQ_CONF_ENV_FILE: path.join(dir, 'rabbitmq-env.conf'),
  }
}

/** The last 2,000 characters of each log file of the node whose folder is `dir`. */
export function lastLog(dir: string): string {
  try {
    return fs
      .readdirSync(path.join(dir, 'log'))
      .map((file) => fs.readFileSync(path.join(dir, 'log', file), 'utf8').slice(-2_000))
      .join('\n')
  } catch {
    return '' // No log written.
  }
}

/**
 * Starts an extra RabbitMQ node for a test that needs a broker configured otherwise than the
 * main one (a short `consumer_timeout`, say), without touching the main broker: its own node
 * name, AMQP and distribution ports, config, data and log folders under the system's temp folder.
 * Boots in a few seconds. Always {@link RabbitNode.stop} it in a `finally` or `afterAll`.
 * Throws, with the node's log, when it does not boot.
 *
 * @example
 * ```ts
 * const node = await startRabbitNode({ prefix: 'acemq-ct', config: { consumer_timeout: '2000' } })
 * try { ... node.url ... } finally { await node.stop() }
 * ```
 */
export async function startRabbitNode(options: RabbitNodeOptions): Promise<RabbitNode> {
  reapOrphans()
  const suffix = Math.random().toString(36).slice(2, 8)
  const name = options.name ?? `${options.prefix}-${suffix}@localhost`
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.prefix}-`))
  const amqpPort = options.amqpPort ?? (await freePort())
  const distPort = options.distPort ?? (await freePort())
  const config: Record<string, string> = {
    'listeners.tcp.1': `127.0.0.1:${amqpPort}`,
    loopback_users: 'none',
    ...options.config,
  }
  if (options.passwordlessUsers !== undefined) {
    config['load_definitions'] = path.join(dir, 'definitions.json')
    fs.writeFileSync(
      config['load_definitions'],
      JSON.stringify(definitions(options.passwordlessUsers)),
    )
  }
  fs.writeFileSync(
    path.join(dir, 'rabbitmq.conf'),
    Object.entries(config)
      .map(([key, value]) => `${key} = ${value}\n`)
      .join(''),
  )
  const advanced = Object.entries(options.rabbitAdvanced ?? {})
    .map(([key, value]) => `{${key}, ${value}}`)
    .join(', ')
  fs.writeFileSync(path.join(dir, 'advanced.config'), `[{rabbit, [${advanced}]}].\n`)
  fs.writeFileSync(path.join(dir, 'enabled_plugins'), `[${(options.plugins ?? []).join(', ')}].\n`)
  // Its own env file, or the main broker's (which names the node `rabbit@localhost`) is read.
  // Distribution (clustering, rabbitmqctl) listens on loopback only.
  fs.writeFileSync(
    path.join(dir, 'rabbitmq-env.conf'),
    'ERL_EPMD_ADDRESS=127.0.0.1\nSERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"\n',
  )
  for (const sub of ['mnesia', 'log']) fs.mkdirSync(path.join(dir, sub))
  // Started as root, RabbitMQ drops to its own user, which must own the node's folders.
  if (process.getuid?.() === 0) await run('chown', ['-R', 'rabbitmq:rabbitmq', dir])

  const ctl = async (...args: string[]): Promise<string> =>
    (await run('rabbitmqctl', ['-n', name, ...args], { timeout: 60_000 })).stdout
  const pid = (): number | undefined => {
    try {
      const value = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8'))
      return Number.isInteger(value) && value > 0 && alive(value) ? value : undefined
    } catch {
      return undefined
    }
  }
  const env = {
    ...process.env,
    RABBITMQ_NODENAME: name,
    RABBITMQ_NODE_PORT: String(amqpPort),
    RABBITMQ_DIST_PORT: String(distPort),
    ...nodeFilesEnv(dir),
  }
  const boot = async (): Promise<void> => {
    try {
      await run('rabbitmq-server', ['-detached'], { env, timeout: 60_000 })
      const deadline = Date.now() + (options.startTimeoutMs ?? 60_000)
      // Each rabbitmqctl call costs 2-3 s of CLI start-up: wait for the AMQP port first, then
      // ask once that the boot has finished (plugins included).
      while (!(await accepts(amqpPort))) {
        if (Date.now() > deadline) throw new Error(`port ${amqpPort} never accepted connections`)
        await sleep(100)
      }
      const left = Math.max(5, Math.ceil((deadline - Date.now()) / 1_000))
      await ctl('await_startup', '--timeout', String(left))
    } catch (error) {
      const log = lastLog(dir)
      throw new Error(`RabbitMQ node ${name} did not start: ${String(error)}\n${log}`, {
        cause: error,
      })
    }
  }

  let stopped = false
  const node: RabbitNode = {
    name,
    url: `amqp://guest:guest@127.0.0.1:${amqpPort}`,
    amqpPort,
    dir,
    ctl,
    pid,
    async kill() {
      const beam = pid()
      if (beam !== undefined) process.kill(beam, 'SIGKILL')
      const deadline = Date.now() + 10_000
      while ((beam !== undefined && alive(beam)) || (await accepts(amqpPort))) {
        if (Date.now() > deadline) throw new Error(`RabbitMQ node ${name} is still running`)
        await sleep(50)
      }
    },
    start: boot,
    async stop() {
      if (stopped) return
      stopped = true
      // RabbitMQ stops gracefully on SIGTERM, without the 2-3 s a rabbitmqctl call costs.
      const beam = pid()
      if (beam !== undefined) {
        process.kill(beam, 'SIGTERM')
        const deadline = Date.now() + 15_000
        while (alive(beam) && Date.now() < deadline) await sleep(50)
      }
      killAndRemove(name, dir)
    },
  }

  register(name, dir)
  try {
    await boot()
  } catch (error) {
    await node.stop()
    throw error
  }
  return node
}
