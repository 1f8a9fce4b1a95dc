import { Kysely, PostgresDialect, sql, type CompiledQuery } from 'kysely'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { DATABASE_URL, requirePostgres } from '@acemq/testing'
import { KyselyOutboxStore, outboxMigration } from '../src/index.js'
import { postgres, uniqueTable, type AppDatabase } from './support/databases.js'
import { kyselyOutboxSuite } from './support/outbox-suite.js'

/** A plan node of `EXPLAIN (FORMAT JSON)`, as far as these tests read it. */
interface PlanNode {
  readonly 'Node Type': string
  readonly 'Index Name'?: string
  readonly Plans?: readonly PlanNode[]
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)]
}

describe.runIf(await requirePostgres())('the Kysely outbox store on Postgres', () => {
  kyselyOutboxSuite({ name: 'Postgres', dialect: 'postgres', open: () => postgres({ max: 4 }) })

  it('claims from a backlog the table has no statistics for yet off the front of the pending index, sorting nothing, and leases the rows through the primary key', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 })
    const ran: CompiledQuery[] = []
    const db = new Kysely<AppDatabase>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        if (event.level === 'query') ran.push(event.query)
      },
    })
    const table = uniqueTable('acemq_outbox')
    try {
      await outboxMigration({ table }).up(db)
      // A backlog written at once, before autovacuum has analyzed the table.
      await sql`insert into ${sql.table(table)} (id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts)
        select 'r-' || n, '', 'q', 'application/json', convert_to('{}', 'UTF8'), '{}', '{}', 1700000000000 + n, 0
        from generate_series(1, 20000) as n`.execute(db)
      const store = new KyselyOutboxStore(db, { table })
      ran.length = 0
      const claimed = await store.claimBatch(100, 30_000)
      expect(claimed.map((record) => record.id)).toEqual(
        Array.from({ length: 100 }, (_, i) => `r-${i + 1}`),
      )
      const claim = ran.find((query) => query.sql.includes('skip locked'))
      expect(claim).toBeDefined()
      const { rows } = await pool.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
        `explain (format json) ${claim?.sql ?? ''}`,
        [...(claim?.parameters ?? [])],
      )
      const nodes = planNodes(rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode)
      const types = nodes.map((node) => node['Node Type'])
      // Sorting the backlog made every claim cost as much as the whole backlog.
      expect(types).not.toContain('Sort')
      expect(types).not.toContain('Seq Scan')
      expect(types).not.toContain('Bitmap Heap Scan')
      expect(new Set(nodes.flatMap((node) => node['Index Name'] ?? []))).toEqual(
        new Set([`${table}_pending_idx`, `${table}_pkey`]),
      )
    } finally {
      await outboxMigration({ table }).down(db)
      await db.destroy()
    }
  })
})
