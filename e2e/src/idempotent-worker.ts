/**
 * A consumer process for the end-to-end tests: an idempotent consumer on RabbitMQ with a
 * Kysely+Postgres store, recording every handler side effect in Postgres. Configured by
 * environment variables; prints `READY` once consuming and `HANDLING <id>` as a handler starts.
 *
 * WORKER_MODE=hang makes the handler never return (the test then kills the process). SIGTERM
 * drains and exits through `shutdownOnSignals`, printing `SHUTDOWN ... drained=...`.
 */
import { AceMq, ConsumerOptions, RetryPolicy, shutdownOnSignals } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { AmqpTransport } from '@acemq/transport-amqp'
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

const db = new Kysely<Record<string, never>>({
  dialect: new PostgresDialect({
    pool: new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4 }),
  }),
})
const store = new KyselyIdempotencyStore(db, {
  table: env('IDEMPOTENCY_TABLE'),
  claimTimeout: Number(env('CLAIM_TIMEOUT_MS')),
})
const mq = await AceMq.connect(
  new AmqpTransport(env('AMQP_URL'), { connectionName: `e2e-${worker}` }),
)

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
    if (mode === 'hang') await new Promise(() => undefined)
    if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs))
    await sql`insert into ${sql.table(effects)} (message_id, worker) values (${message.envelope.id}, ${worker})`.execute(
      db,
    )
  },
)
console.log('READY')

shutdownOnSignals(mq, {
  timeout: '10s',
  onShutdown: (result) =>
    console.log(
      `SHUTDOWN ${result.signal} drained=${result.drained} closed=${result.closed} ms=${result.durationMs}`,
    ),
})
