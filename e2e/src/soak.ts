/**
 * `pnpm test:soak [--minutes N] [--rate R] [--postgres-restarts] [--broker-restarts]`: a
 * producer (this process, publishing numbered messages with confirms and sending again what
 * fails) and idempotent consumers (`idempotent-worker` child processes on the Postgres store)
 * against the main broker — in a virtual host of its own — and Postgres, for N minutes (3),
 * with a fault injected every 10–30 s, the kinds in a random order that takes each once before
 * any comes again:
 *
 * - every connection of the run's virtual host closed (`rabbitmqctl close_all_connections`);
 * - the broker's memory alarm for 3 s (`set_vm_memory_high_watermark`, always restored, under
 *   the broker-fault lock the fault tests share);
 * - a worker killed with SIGKILL once its handlers are stalled (never `w1`, whose memory is
 *   measured) and a new one started;
 * - with `--postgres-restarts` only, Postgres stopped and started (`pg_ctlcluster`);
 * - with `--broker-restarts` only, the main broker's application stopped for 2 s and started
 *   again (`rabbitmqctl stop_app` / `start_app`, always started again, under the broker-fault
 *   lock).
 *
 * The last two disturb everyone on the machine (every client of the broker loses its
 * connection), so they are asked for; CI's form, where nothing else runs, asks for both. It
 * ends with the checker the partition tests use (0 lost, 0 duplicate side effects, failed
 * publishes handled at most once), resident memory at start and end, and publish →
 * side-effect latency p50/p99; it exits 1 when a confirmed message was lost or a side effect
 * happened twice.
 */
import { RetryPolicy, Topology } from '@acemq/core'
import { createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { sql } from 'kysely'
import {
  clearMemoryAlarm,
  rabbitmqctl,
  raiseMemoryAlarm,
  withBrokerFault,
} from '../../test-support/broker-faults.js'
import { BrokerVhost } from '../../test-support/broker-vhost.js'
import { printAccounting } from '../test/accounting.js'
import { checkDeliveries, checkPassed, checkRows, quantile } from '../test/delivery-check.js'
import { NumberedPublisher } from '../test/numbered-publisher.js'
import { ensurePostgresRunning, hasLocalPostgres, stopPostgres } from '../test/postgres-faults.js'
import { effectsDatabase, startIdempotentWorker, type Child } from '../test/support.js'

function option(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`)
  return at < 0 ? undefined : process.argv[at + 1]
}
/** A positive number given as `--name` (or by `fallback`), or a clear error naming both. */
function positive(name: string, fallback: string): number {
  const text = option(name) ?? fallback
  const value = Number(text)
  if (!(value > 0) || !Number.isFinite(value)) {
    throw new Error(`--${name} takes a positive number; got ${JSON.stringify(text)}`)
  }
  return value
}
const minutes = positive('minutes', process.env['ACEMQ_SOAK_MINUTES'] ?? '3')
const rate = positive('rate', '50')
const postgresRestarts = process.argv.includes('--postgres-restarts')
const brokerRestarts = process.argv.includes('--broker-restarts')
if (postgresRestarts && !hasLocalPostgres()) throw new Error('no local Postgres cluster to restart')

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const log = (line: string): void => console.log(`[soak ${new Date().toISOString()}] ${line}`)
const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`

async function poll(condition: () => Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`)
    await sleep(2_000)
  }
}

async function ask<T>(child: Child, command: string, kind: string): Promise<T> {
  const from = child.lines.length
  child.send(command)
  const line = await child.waitFor(new RegExp(`^${kind} `), 10_000, from)
  return JSON.parse(line.slice(kind.length + 1)) as T
}

const CLAIM_TIMEOUT_MS = 3_000
const CONCURRENCY = 4
const queue = 'soak.work'
const vhost = await BrokerVhost.create('acemq-soak')
const database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
await sql`alter table ${sql.table(database.effectsTable)} add column at timestamptz not null default clock_timestamp()`.execute(
  database.db,
)
const workers: Child[] = []
/** What a fault has stopped (or raised) and the clean-up must undo if the run ends first. */
const toUndo = new Map<string, () => Promise<void>>()
let cleaned = false

async function cleanUp(): Promise<void> {
  if (cleaned) return
  cleaned = true
  for (const worker of workers) worker.process.kill('SIGKILL')
  for (const undo of toUndo.values()) await undo().catch(() => undefined)
  await vhost.delete()
  await database.drop().catch(() => undefined)
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`)
    void cleanUp().finally(() => process.exit(130))
  })
}

let workerCount = 0
function startWorker(): Child {
  workerCount++
  const worker = startIdempotentWorker(vhost.url, queue, database, `w${workerCount}`, {
    CLAIM_TIMEOUT_MS: String(CLAIM_TIMEOUT_MS),
    HANDLER_MS: '5',
    PREFETCH: '20',
    CONCURRENCY: String(CONCURRENCY),
  })
  // Only what a worker says at the end matters: drop its per-message lines as they come.
  worker.process.stdout?.on('data', () => {
    if (worker.lines.length > 5_000) worker.lines.splice(0, worker.lines.length - 1_000)
  })
  workers.push(worker)
  return worker
}
/**
 * A fault that takes something away for `ms` under the broker-fault lock the fault tests
 * share, and always gives it back (`restore`), in a finally and, should the run end first, in
 * the clean-up.
 */
function outage(
  name: string,
  take: () => Promise<void>,
  restore: () => Promise<void>,
  ms: number,
): () => Promise<void> {
  return () =>
    withBrokerFault(async () => {
      toUndo.set(name, restore)
      try {
        await take()
        await sleep(ms)
      } finally {
        await restore()
        toUndo.delete(name)
      }
    })
}
/** `items` in a random order (Fisher–Yates). */
function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items]
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[copy[i], copy[j]] = [copy[j] as T, copy[i] as T]
  }
  return copy
}
/** Starts the main broker's application again and waits until it serves. */
async function startBroker(): Promise<void> {
  await rabbitmqctl('start_app')
  await rabbitmqctl('await_startup')
}
const alive = (child: Child): boolean =>
  child.process.exitCode === null && child.process.signalCode === null

let exitCode = 1
try {
  const mq = await connect(vhost.url, {
    connectionName: 'soak-producer',
    recovery: { initialDelay: 100, maxDelay: 1_000 },
  })
  await mq.applyTopology(Topology.define().queueWithRetry(queue, RetryPolicy.fixed(50, 200)))
  const live = [startWorker(), startWorker()]
  await Promise.all(live.map((w) => w.waitFor(/^READY$/, 30_000)))
  const runMs = minutes * 60_000
  const publisher = new NumberedPublisher(mq, queue, {
    total: Math.ceil((rate * runMs) / 1_000) + 1_000,
    prefix: 's-',
    window: 50,
    ratePerSecond: rate,
    giveUpAfterMs: 120_000,
  })
  const started = Date.now()
  const publishing = publisher.run()
  await sleep(5_000)
  const rssStart = { producer: process.memoryUsage().rss, w1: 0 }
  rssStart.w1 = (await ask<{ rss: number }>(live[0] as Child, 'stats', 'STATS')).rss

  const faults: Record<string, number> = {}
  const kinds: [string, () => Promise<void>][] = [
    ['connections closed', () => vhost.closeAllConnections()],
    ['memory alarm (3 s)', outage('memory alarm', raiseMemoryAlarm, clearMemoryAlarm, 3_000)],
    [
      'worker SIGKILL',
      async () => {
        const victim = 1 + Math.floor(Math.random() * (live.length - 1))
        const worker = live[victim] as Child
        // As the faults run does: once its handlers are all stalled, no handler is between its
        // side effect and its confirm, and the kill leaves only claims for others to take
        // over. (Killed anywhere else, a handler whose side effect committed before its claim
        // was confirmed runs again after the lease: the store's at-least-once window.)
        const stalled = (): number => worker.lines.filter((l) => l.startsWith('STALLED ')).length
        worker.send('stall')
        const until = Date.now() + 20_000
        while (stalled() < CONCURRENCY && Date.now() < until) await sleep(50)
        worker.process.kill('SIGKILL')
        const replacement = startWorker()
        live[victim] = replacement
        await replacement.waitFor(/^READY$/, 60_000)
      },
    ],
  ]
  if (postgresRestarts) {
    kinds.push(['Postgres restart', outage('Postgres', stopPostgres, ensurePostgresRunning, 2_000)])
  }
  if (brokerRestarts) {
    kinds.push([
      'broker restart',
      outage('broker', () => rabbitmqctl('stop_app').then(() => undefined), startBroker, 2_000),
    ])
  }
  // Each kind once, in a random order, before any comes again: a short run sees them all.
  let order: typeof kinds = []
  while (Date.now() - started < runMs - 15_000) {
    await sleep(10_000 + Math.random() * 20_000)
    if (Date.now() - started >= runMs - 10_000) break
    if (order.length === 0) order = shuffled(kinds)
    const [name, inject] = order.shift() as (typeof kinds)[0]
    const at = Date.now()
    await inject()
    faults[name] = (faults[name] ?? 0) + 1
    log(
      `${name} in ${Date.now() - at} ms (published ${publisher.started}, confirmed ${publisher.confirmed})`,
    )
  }
  const remaining = runMs - (Date.now() - started)
  if (remaining > 0) await sleep(remaining)
  publisher.stop()
  await publishing
  const rssEnd = {
    producer: process.memoryUsage().rss,
    w1: (await ask<{ rss: number }>(live[0] as Child, 'stats', 'STATS')).rss,
  }

  const records = [...publisher.records.values()]
  const handledIds = async (): Promise<Set<string>> => new Set((await database.effects()).keys())
  await poll(
    async () => {
      const handled = await handledIds()
      return records.every((r) => !r.confirmed || handled.has(r.id))
    },
    180_000,
    'every confirmed message handled',
  )
  await poll(() => vhost.isEmpty(queue), 120_000, `the queue '${queue}' empty`)
  await sleep(2 * CLAIM_TIMEOUT_MS)

  const effects = await database.effects()
  const { rows } = await sql<{
    message_id: string
    at_ms: string
  }>`select message_id, extract(epoch from min(at)) * 1000 as at_ms from ${sql.table(database.effectsTable)} group by message_id`.execute(
    database.db,
  )
  const sentAt = new Map(records.map((r) => [r.id, r.firstSentAt]))
  const latencies = rows
    .filter((row) => sentAt.has(row.message_id))
    .map((row) => Number(row.at_ms) - (sentAt.get(row.message_id) as number))
  const queues = await vhost.queueCounts()
  const check = checkDeliveries(records, effects)
  const elapsed = Date.now() - started
  printAccounting(`soak: ${minutes} min at ${rate}/s, ${(elapsed / 60_000).toFixed(1)} min`, [
    ...checkRows(check),
    ['dead-lettered', queues.get(`${queue}.dlq`)?.ready ?? 0],
    ['parked', queues.get(`${queue}.parked`)?.ready ?? 0],
    ...Object.entries(faults).map(([name, n]) => [`fault: ${name}`, n] as [string, number]),
    ...[...publisher.errorCounts].map(
      ([name, n]) => [`failed sends: ${name}`, n] as [string, number],
    ),
    ['workers started', workerCount],
    ['RSS producer (start -> end)', `${mb(rssStart.producer)} -> ${mb(rssEnd.producer)}`],
    ['RSS worker w1 (start -> end)', `${mb(rssStart.w1)} -> ${mb(rssEnd.w1)}`],
    ['publish -> side effect p50 (ms)', Math.round(quantile(latencies, 0.5))],
    ['publish -> side effect p99 (ms)', Math.round(quantile(latencies, 0.99))],
    ['publish -> side effect max (ms)', Math.round(quantile(latencies, 1))],
  ])
  exitCode = checkPassed(check) ? 0 : 1
  for (const worker of live) if (alive(worker)) worker.process.kill('SIGTERM')
  await Promise.all(live.map((worker) => worker.exited))
  await mq.close({ drainTimeout: 0 })
  log(exitCode === 0 ? 'PASSED' : 'FAILED: lost or duplicated messages')
} catch (error) {
  log(`FAILED: ${String(error)}`)
} finally {
  await cleanUp()
}
process.exit(exitCode)
