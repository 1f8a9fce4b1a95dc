// An outbox relay in a process of its own, for the end-to-end tests: relays the outbox table
// OUTBOX_TABLE to RabbitMQ until SIGTERM (then closes, which stops the relay after its round)
// or SIGKILL. With STALL_AFTER_CONFIRM=n, the n-th mark after the broker's confirms never
// happens: it prints `STALLED <ids>` and hangs there, so a test can kill the relay between
// the confirm and the mark. With HOLD_FIRST_BATCH=1, the relay holds its first claimed batch,
// prints `FIRST <n>`, and goes on only when a `GO` line comes on stdin: a test can make two
// relays hold claims at once however a loaded machine schedules them.
import { type OutboxStore } from '@acemq/core'
import { describeError } from '@acemq/core/spi'
import { KyselyOutboxStore } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`${name} is not set`)
  return value
}

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4 })
// Postgres restarting must fail queries, not crash the process (see e2e/test/support.ts).
pool.on('error', () => undefined)
pool.on('connect', (client) => client.on('error', () => undefined))
const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
const kysely = new KyselyOutboxStore(db, { table: env('OUTBOX_TABLE') })

const stallAfter = Number(env('STALL_AFTER_CONFIRM', '0'))
const holdFirst = env('HOLD_FIRST_BATCH', '0') === '1'
let marks = 0
let held = false
const go = new Promise<void>((resolve) => {
  if (!holdFirst) return
  let input = ''
  process.stdin.on('data', (chunk: Buffer) => {
    input += chunk.toString()
    if (/^GO$/m.test(input)) resolve()
  })
})
const store: OutboxStore =
  stallAfter > 0 || holdFirst
    ? new Proxy(kysely, {
        get(target, property, receiver) {
          if (property === 'markPublished' && stallAfter > 0) {
            return async (ids: string | readonly string[]) => {
              if (++marks === stallAfter) {
                process.stdout.write(`STALLED ${JSON.stringify(ids)}\n`)
                await new Promise(() => undefined)
              }
              return target.markPublished(ids)
            }
          }
          if (property === 'claimBatch' && holdFirst) {
            return async (...args: Parameters<OutboxStore['claimBatch']>) => {
              const batch = await target.claimBatch(...args)
              if (!held && batch.length > 0) {
                held = true
                process.stdout.write(`FIRST ${batch.length}\n`)
                await go
              }
              return batch
            }
          }
          const value: unknown = Reflect.get(target, property, receiver)
          return typeof value === 'function' ? (value as () => unknown).bind(target) : value
        },
      })
    : kysely

let errors = 0
const mq = await connect(env('AMQP_URL'), {
  connectionName: `e2e-outbox-relay-${env('RELAY_NAME', 'relay')}`,
  recovery: { initialDelay: 100, maxDelay: 1_000 },
  onError: (error, context) => {
    errors++
    process.stdout.write(`ERROR ${context}: ${describeError(error)}\n`)
  },
})
mq.transport.onEvent((event) => process.stdout.write(`EVENT ${event.type}\n`))
const relay = mq.outbox(store, {
  batch: Number(env('BATCH', '50')),
  poll: Number(env('POLL', '50')),
  lease: Number(env('LEASE', '30000')),
})
relay.start()
process.stdout.write('READY\n')

process.on('SIGTERM', () => {
  void (async () => {
    await mq.close()
    await db.destroy()
    process.stdout.write(
      `DONE ${JSON.stringify({ published: relay.published, failed: relay.failed, errors })}\n`,
    )
    process.exit(0)
  })()
})
