import { execFile } from 'node:child_process'
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
}

/** A RabbitMQ node of its own, beside the main broker, with its own name, ports and data. */
export interface RabbitNode {
  /** `name@localhost`, for `rabbitmqctl -n`. */
  readonly name: string
  /** `amqp://guest:guest@127.0.0.1:<port>`. */
  readonly url: string
  /** Runs `rabbitmqctl -n <node>` with `args`. */
  ctl(...args: string[]): Promise<string>
  /** Stops the node and removes its files. Never throws; safe to call twice. */
  stop(): Promise<void>
}

function freePort(): Promise<number> {
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
  const suffix = Math.random().toString(36).slice(2, 8)
  const name = `${options.prefix}-${suffix}@localhost`
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${options.prefix}-`))
  const [amqpPort, distPort] = [await freePort(), await freePort()]
  const config = {
    'listeners.tcp.1': `127.0.0.1:${amqpPort}`,
    loopback_users: 'none',
    ...options.config,
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
  fs.writeFileSync(path.join(dir, 'enabled_plugins'), '[].\n')
  // Its own env file, or the main broker's (which names the node `rabbit@localhost`) is read.
  fs.writeFileSync(path.join(dir, 'rabbitmq-env.conf'), 'ERL_EPMD_ADDRESS=127.0.0.1\n')
  for (const sub of ['mnesia', 'log']) fs.mkdirSync(path.join(dir, sub))
  // Started as root, RabbitMQ drops to its own user, which must own the node's folders.
  if (process.getuid?.() === 0) await run('chown', ['-R', 'rabbitmq:rabbitmq', dir])

  const ctl = async (...args: string[]): Promise<string> =>
    (await run('rabbitmqctl', ['-n', name, ...args], { timeout: 60_000 })).stdout
  let stopped = false
  const node: RabbitNode = {
    name,
    url: `amqp://guest:guest@127.0.0.1:${amqpPort}`,
    ctl,
    async stop() {
      if (stopped) return
      stopped = true
      await ctl('stop').catch(() => {
        // Not answering: end it by its pid, if it wrote one.
        try {
          const pid = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8'))
          if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGKILL')
        } catch {
          // Never started, or already gone.
        }
      })
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }

  const env = {
    ...process.env,
    RABBITMQ_NODENAME: name,
    RABBITMQ_NODE_PORT: String(amqpPort),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(dir, 'log'),
    RABBITMQ_PID_FILE: path.join(dir, 'pid'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
    RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: path.join(dir, 'advanced.config'),
    RABBITMQ_CONF_ENV_FILE: path.join(dir, 'rabbitmq-env.conf'),
  }
  try {
    await run('rabbitmq-server', ['-detached'], { env, timeout: 60_000 })
    const deadline = Date.now() + (options.startTimeoutMs ?? 60_000)
    for (;;) {
      try {
        await ctl('await_startup', '--timeout', '10')
        break
      } catch (error) {
        if (Date.now() > deadline) throw error
        await sleep(250)
      }
    }
  } catch (error) {
    let log = ''
    try {
      log = fs
        .readdirSync(path.join(dir, 'log'))
        .map((file) => fs.readFileSync(path.join(dir, 'log', file), 'utf8').slice(-2_000))
        .join('\n')
    } catch {
      // No log written.
    }
    await node.stop()
    throw new Error(`RabbitMQ node ${name} did not start: ${String(error)}\n${log}`, {
      cause: error,
    })
  }
  return node
}
