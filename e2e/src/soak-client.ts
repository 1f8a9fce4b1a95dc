/**
 * One AceMq connection that publishes steady traffic to a queue and consumes it, for the soak
 * test (run with `--expose-gc`). Prints `READY` once consuming and `EVENT <type>` for every
 * transport event, and takes one command per line on standard input:
 * - `progress` prints `PROGRESS <json>` (sent, confirmed, failed, handled) at once;
 * - `stats` pauses the traffic, lets the sends and handlers in flight finish, collects garbage
 *   and prints `STATS <json>`: resident and heap memory, and the active handles and requests
 *   by type (`process.getActiveResourcesInfo()`); then the traffic resumes;
 * - `stop` stops the traffic for good and prints `STOPPED <json>` once every send is settled;
 * - `handled` prints `HANDLED <json>`: the numbers the consumer has seen, and those confirmed.
 *
 * Environment: AMQP_URL, QUEUE, RATE (messages per second, default 100).
 */
import { createInterface } from 'node:readline'
import { ConsumerOptions, RetryPolicy, Topology } from '@acemq/core'
import { type TransportEvent } from '@acemq/core/spi'
import { connect } from '@acemq/transport-amqp'

function env(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`${name} is not set`)
  return value
}

const queue = env('QUEUE')
const rate = Number(process.env['RATE'] ?? '100')
const policy = RetryPolicy.fixed(5, 50)
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const counts = { sent: 0, confirmed: 0, failed: 0, handled: 0, engineErrors: 0 }
const confirmed = new Set<number>()
const handled = new Set<number>()

const mq = await connect(env('AMQP_URL'), {
  connectionName: 'e2e-soak',
  recovery: { initialDelay: 100, maxDelay: 1_000 },
  onError: () => {
    counts.engineErrors++
  },
})
mq.transport.onEvent((event: TransportEvent) => console.log(`EVENT ${event.type}`))
await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
await mq.consume<{ n: number }>(
  queue,
  ConsumerOptions.defaults().withRetry(policy).withPrefetch(20),
  (message) => {
    counts.handled++
    handled.add(message.payload.n)
  },
)
const publisher = mq.publisher<{ n: number }>('', queue)
console.log('READY')

let paused = false
let stopped = false
let inFlight = 0
let next = 1

async function send(n: number): Promise<void> {
  inFlight++
  counts.sent++
  try {
    await publisher.send({ n })
    counts.confirmed++
    confirmed.add(n)
  } catch {
    // While the connection recovers a send fails at once; the soak only needs steady traffic.
    counts.failed++
  } finally {
    inFlight--
  }
}

async function traffic(): Promise<void> {
  while (!stopped) {
    if (!paused) void send(next++)
    await sleep(1_000 / rate)
  }
}
void traffic()

async function settled(): Promise<void> {
  const deadline = Date.now() + 5_000
  while ((inFlight > 0 || mq.inFlight > 0) && Date.now() < deadline) await sleep(10)
}

function resources(): Record<string, number> {
  const byType: Record<string, number> = {}
  for (const type of process.getActiveResourcesInfo()) byType[type] = (byType[type] ?? 0) + 1
  return byType
}

async function stats(): Promise<void> {
  paused = true
  await settled()
  // A second pass collects what the first one's finalizers let go.
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.()
    await sleep(20)
  }
  const memory = process.memoryUsage()
  console.log(
    `STATS ${JSON.stringify({
      rss: memory.rss,
      heapUsed: memory.heapUsed,
      external: memory.external,
      resources: resources(),
      ...counts,
      gc: typeof globalThis.gc === 'function',
    })}`,
  )
  paused = false
}

const commands = createInterface({ input: process.stdin })
commands.on('line', (line) => {
  const command = line.trim()
  if (command === 'progress') console.log(`PROGRESS ${JSON.stringify(counts)}`)
  else if (command === 'stats') void stats()
  else if (command === 'stop') {
    stopped = true
    void settled().then(() => console.log(`STOPPED ${JSON.stringify(counts)}`))
  } else if (command === 'handled') {
    console.log(
      `HANDLED ${JSON.stringify({ confirmed: [...confirmed].sort((a, b) => a - b), handled: [...handled].sort((a, b) => a - b) })}`,
    )
  } else if (command === 'close') {
    stopped = true
    void mq.close({ drainTimeout: '5s' }).then(() => {
      console.log('CLOSED')
      commands.close()
    })
  }
})
