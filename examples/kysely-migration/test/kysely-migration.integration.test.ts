import { afterAll, describe, expect, it } from 'vitest'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { DATABASE_URL, requirePostgres, uniqueName } from '@acemq/testing'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { runExample } from '../../test-support/run-example.js'

const hasPostgres = await requirePostgres()

describe.runIf(hasPostgres)('the kysely-migration example', () => {
  const table = uniqueName('examples_idempotency').replace('.', '_')
  const tables = [table, `${table}_migration`, `${table}_migration_lock`]
  const db = new Kysely<Record<string, never>>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max: 1 }) }),
  })

  afterAll(async () => {
    for (const name of tables) await sql`drop table if exists ${sql.table(name)}`.execute(db)
    await db.destroy()
  })

  it('migrates up, claims and confirms an id, migrates down and leaves no table behind', async () => {
    const { code, output } = await runExample('kysely-migration', {
      DATABASE_URL,
      IDEMPOTENCY_TABLE: table,
    })

    expect(code, output).toBe(0)
    expectLinesInOrder(output, [
      /^migrateToLatest: 2025_01_01_acemq_idempotency Up Success$/,
      /^tryClaim\('order-1'\) → claimed$/,
      /^confirm\('order-1'\)$/,
      /^tryClaim\('order-1'\) → duplicate$/,
      /^migrateDown: 2025_01_01_acemq_idempotency Down Success$/,
      new RegExp(`^table ${table} exists: false$`),
    ])
    for (const name of tables) {
      const { rows } = await sql<{
        found: string | null
      }>`select to_regclass(${name}) as found`.execute(db)
      expect(rows[0]?.found, name).toBeNull()
    }
  }, 60_000)

  it('runs twice with the same output', async () => {
    await expectRepeatable('kysely-migration', { DATABASE_URL, IDEMPOTENCY_TABLE: table })
  }, 90_000)
})
