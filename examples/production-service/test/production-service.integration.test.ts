import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { startExample } from '../../test-support/run-example.js'

const hasServices = (await requireRabbit()) && (await requirePostgres())

/** What a run prints, from start-up to the last thing its shutdown closes. */
function story(queue: string, table: string): RegExp[] {
  return [
    new RegExp(`^database: idempotency table ${table} ready$`),
    /^broker: connected to amqp:\/\/.*$/,
    /^o-1: shipped \(attempt 1\)$/,
    /^o-2: attempt 1 failed \(billing timed out\): retried$/,
    new RegExp(`^o-3: refused \\(total 0\\): to ${queue}\\.dlq$`),
    /^o-2: shipped \(attempt 2\)$/,
    /^o-1: sent twice, handled 1 time\(s\)$/,
    new RegExp(`^${queue}\\.dlq: 1 message \\(o-3\\)$`),
    /^GET \/acemq-health → 200 UP \(connection UP, consumers UP, idempotency-store UP\)$/,
  ]
}

/** The shutdown, in order: drain and close, the HTTP server, the store and pool, telemetry last. */
const shutdown = [
  /^SIGTERM: drained=true closed=true$/,
  /^closed: http server$/,
  /^closed: idempotency store and pg pool$/,
  /^closed: telemetry \(spans: .+ process, .+ publish; acemq\.consume\.total acked=3 rejected=1 retried=1\)$/,
]

describe.runIf(hasServices)('the production-service example', () => {
  const queue = uniqueName('examples.production-service')
  const table = uniqueName('examples_production').replace('.', '_')
  const queues = [queue, `${queue}.dlq`, `${queue}.parked`]
  const tables = [table, `${table}_migration`, `${table}_migration_lock`]
  let admin: AmqpAdmin
  let db: Kysely<Record<string, never>>

  async function tablesLeft(): Promise<string[]> {
    const left: string[] = []
    for (const name of tables) {
      const { rows } = await sql<{
        found: string | null
      }>`select to_regclass(${name}) as found`.execute(db)
      if (rows[0]?.found != null) left.push(name)
    }
    return left
  }

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
    db = new Kysely({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: DATABASE_URL, max: 1 }),
      }),
    })
  })

  afterAll(async () => {
    await admin.deleteQueues(...queues)
    await admin.close()
    for (const name of tables) await sql`drop table if exists ${sql.table(name)}`.execute(db)
    await db.destroy()
  })

  it(
    'handles, retries, dead-letters and deduplicates by business id, answers health, and on SIGTERM closes everything in order; twice, the same, leaving nothing behind',
    async () => {
      const output = await withoutBrokerFaults(() =>
        expectRepeatable(
          'production-service',
          { AMQP_URL, DATABASE_URL, QUEUE: queue, IDEMPOTENCY_TABLE: table },
          { queues },
        ),
      )
      expectLinesInOrder(output, [
        ...story(queue, table),
        /^sending SIGTERM to itself, as a deploy would$/,
        ...shutdown.slice(0, 2),
        /^demo: its queues and table removed$/,
        ...shutdown.slice(2),
      ])
      expect(output).not.toContain('guest:guest@')
      expect(await tablesLeft()).toStrictEqual([])
    },
    LOCK_WAIT_TIMEOUT + 120_000,
  )

  it(
    'with KEEP_RUNNING=1 serves until SIGTERM, then closes everything in order and exits 0',
    async () => {
      await withoutBrokerFaults(async () => {
        const example = startExample('production-service', {
          AMQP_URL,
          DATABASE_URL,
          QUEUE: queue,
          IDEMPOTENCY_TABLE: table,
          KEEP_RUNNING: '1',
        })
        const serving = await example.waitFor(
          /^serving http:\/\/127\.0\.0\.1:\d+\/acemq-health/,
          60_000,
        )
        const endpoint = /^serving (\S+)/.exec(serving)?.[1] as string
        const response = await fetch(endpoint)
        expect(response.status).toBe(200)
        expect(Object.keys((await response.json()) as object)[0]).toBe('status')
        example.process.kill('SIGTERM')
        expect(await example.exited(), example.output()).toBe(0)
        expectLinesInOrder(example.output(), [...story(queue, table), ...shutdown])
        // A service keeps its queues and table: only a demo run removes them.
        expect(await admin.count(queue)).toBe(0)
      })
    },
    LOCK_WAIT_TIMEOUT + 120_000,
  )
})
