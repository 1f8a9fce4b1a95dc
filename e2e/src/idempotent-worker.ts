/**
 * A consumer process for the end-to-end tests: an idempotent consumer on RabbitMQ with a
 * Kysely+Postgres store, recording every handler side effect in Postgres. Configured by
 * environment variables; prints `READY` once consuming and `HANDLING <id>` as a handler starts.
 *
 * WORKER_MODE=hang makes the handler never return (the test then kills the process). SIGTERM
 * drains and exits through `shutdownOnSignals`, printing `SHUTDOWN ... drained=...`.
 *
 * It also prints `EVENT <type>` for every transport event (disconnected, reconnected, blocked,
 * unblocked), and takes one command per line on standard input:
 * - `health` prints `HEALTH <json>`, the JSON a health endpoint would serve;
 * - `stats` prints `STATS <json>`: handled messages and the failures the engine recovered from;
 * - `stall` makes every handler that starts from now on print `STALLED <id>` and never return,
 *   so that once `CONCURRENCY` of them have, the process holds that many claims and nothing
 *   else is running (a test then kills it).
 */
import { createInterface } from 'node:readline'
import { ConsumerOptions, RetryPolicy, shutdownOnSignals, toHealthJson } from '@acemq/core'
import { type TransportEvent } from '@acemq/core/spi'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'

function env(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`${name} is not set`)
  return value
}

const queue = env('QUEUE')
const effects = env('EFFECTS_TABLE')
const worker = env('WORKER_NAME')
const mode = process.env['WORKER_MODE'] ?? 'work'
const handlerMs = Number(process.env['HANDLER_MS'] ?? '0')
const recoveryMaxDelay = process.env['RECOVERY_MAX_DELAY_MS']

/** What happened in this process, for `stats`. */
const stats = {
  handled: 0,
  /** Claims, confirms and releases the store could not do (the message was put back). */
  storeErrors: 0,
  /** Copies (retries, put-backs) the broker did not take (the original went back). */
  moveErrors: 0,
  otherErrors: 0,
  /** Idle pool clients that lost their server. */
  poolErrors: 0,
  disconnected: 0,
  reconnected: 0,
  blocked: 0,
}

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4 })
// A client whose server went away (a Postgres restart) emits `error`: on the pool while it is
// idle, on the client itself while it is checked out (Kysely holds one for every query).
// Nobody listening would throw it out of the process; the query in flight fails either way.
pool.on('error', () => {
  stats.poolErrors++
})
pool.on('connect', (client) =>
  client.on('error', () => {
    stats.poolErrors++
  }),
)
const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
const store = new KyselyIdempotencyStore(db, {
  table: env('IDEMPOTENCY_TABLE'),
  claimTimeout: Number(env('CLAIM_TIMEOUT_MS')),
})
const mq = await connect(env('AMQP_URL'), {
  connectionName: `e2e-${worker}`,
  ...(recoveryMaxDelay !== undefined && {
    recovery: { initialDelay: 100, maxDelay: Number(recoveryMaxDelay) },
  }),
  onError: (_error, context) => {
    if (/idempotency store|could not confirm|could not release/.test(context)) stats.storeErrors++
    else if (context.startsWith('could not move')) stats.moveErrors++
    else if (!context.startsWith('the connection was lost')) stats.otherErrors++
  },
})
mq.transport.onEvent((event: TransportEvent) => {
  if (event.type === 'disconnected') stats.disconnected++
  if (event.type === 'reconnected') stats.reconnected++
  if (event.type === 'blocked') stats.blocked++
  console.log(`EVENT ${event.type}`)
})

let stalled = false
const never = new Promise<never>(() => undefined)

await mq.consume<{ n: number }>(
  queue,
  ConsumerOptions.defaults()
    .idempotent(store)
    .withRetry(RetryPolicy.fixed(50, 200))
    .withInProgressDelay(Number(process.env['IN_PROGRESS_DELAY_MS'] ?? '200'))
    .withPrefetch(Number(process.env['PREFETCH'] ?? '10'))
    .withConcurrency(Number(process.env['CONCURRENCY'] ?? '1')),
  async (message) => {
    console.log(`HANDLING ${message.envelope.id}`)
    if (mode === 'hang') await never
    if (stalled) {
      console.log(`STALLED ${message.envelope.id}`)
      await never
    }
    if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
    await sql`insert into ${sql.table(effects)} (message_id, worker) values (${message.envelope.id}, ${worker})`.execute(
      db,
    )
    stats.handled++
  },
)
console.log('READY')

const commands = createInterface({ input: process.stdin })
commands.on('line', (line) => {
  const command = line.trim()
  if (command === 'health') {
    void mq.health().then((result) => console.log(`HEALTH ${JSON.stringify(toHealthJson(result))}`))
  } else if (command === 'stats') {
    console.log(
      `STATS ${JSON.stringify({ ...stats, inFlight: mq.inFlight, rss: process.memoryUsage().rss })}`,
    )
  } else if (command === 'stall') {
    stalled = true
    console.log('STALL')
  }
})
// Standard input must not keep the process alive once the connection has closed.
if ('unref' in process.stdin && typeof process.stdin.unref === 'function') process.stdin.unref()

shutdownOnSignals(mq, {
  timeout: '10s',
  onShutdown: (result) =>
    console.log(
      `SHUTDOWN ${result.signal} drained=${result.drained} closed=${result.closed} ms=${result.durationMs}`,
    ),
})
