/**
 * A consumer process for the bad-input test: an idempotent JSON consumer (Kysely+Postgres
 * store, `RetryPolicy.fixed(3, 10).giveUpAfter('1h')`) fed raw messages with hostile headers,
 * bodies and content types. Prints `READY` once consuming; `stats` on standard input prints
 * `STATS <json>` (the failures the engine reported, by kind). SIGTERM drains and exits.
 *
 * The handler expects `{ kind: 'ok' | 'fail' }` objects and the test's `x-test-seq` header:
 * - `ok` records a side effect (message_id = the seq, worker = the envelope id) and returns;
 * - `fail` throws, so the message is retried until the policy gives up and dead-letters it;
 * - any other payload (text, bytes, a JSON number, null, an array) is refused with a
 *   `FatalError` and dead-lettered.
 *
 * Environment: AMQP_URL, DATABASE_URL, QUEUE, IDEMPOTENCY_TABLE, EFFECTS_TABLE.
 */
import { createInterface } from 'node:readline'
import { ConsumerOptions, FatalError, RetryPolicy, shutdownOnSignals } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'

function env(name: string): string {
  const value = process.env[name]
  if (value === undefined || value === '') throw new Error(`${name} is not set`)
  return value
}

const effects = env('EFFECTS_TABLE')
const reported = new Map<string, number>()

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 8 })
pool.on('error', () => undefined)
pool.on('connect', (client) => client.on('error', () => undefined))
const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
const store = new KyselyIdempotencyStore(db, { table: env('IDEMPOTENCY_TABLE') })

const mq = await connect(env('AMQP_URL'), {
  connectionName: 'e2e-bad-input',
  onError: (_error, context) => {
    // "could not move message <id> to '<queue>'; ..." → "could not move message"
    const kind = context.replace(/ message .*$/, ' message')
    reported.set(kind, (reported.get(kind) ?? 0) + 1)
  },
})

function kindOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (value instanceof Uint8Array) return 'bytes'
  return `a ${typeof value}`
}

await mq.consume<unknown>(
  env('QUEUE'),
  ConsumerOptions.defaults()
    .idempotent(store)
    .withRetry(RetryPolicy.fixed(3, 10).giveUpAfter('1h'))
    .withInProgressDelay(100)
    .withPrefetch(50)
    .withConcurrency(8),
  async (message) => {
    const seq = message.headers['x-test-seq']
    const payload = message.payload
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new FatalError(`not an order: got ${kindOf(payload)}`)
    }
    if (payload instanceof Uint8Array) throw new FatalError('not an order: got bytes')
    const kind = (payload as { kind?: unknown }).kind
    if (kind === 'fail') throw new Error('asked to fail')
    if (kind !== 'ok') throw new FatalError(`not an order: kind ${JSON.stringify(kind)}`)
    await sql`insert into ${sql.table(effects)} (message_id, worker) values (${String(seq)}, ${message.envelope.id})`.execute(
      db,
    )
  },
)
console.log('READY')

const commands = createInterface({ input: process.stdin })
commands.on('line', (line) => {
  if (line.trim() === 'stats') console.log(`STATS ${JSON.stringify(Object.fromEntries(reported))}`)
})
if ('unref' in process.stdin && typeof process.stdin.unref === 'function') process.stdin.unref()

shutdownOnSignals(mq, {
  timeout: '10s',
  onShutdown: (result) =>
    console.log(`SHUTDOWN ${result.signal} drained=${result.drained} closed=${result.closed}`),
})
