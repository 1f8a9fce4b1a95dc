import { Kysely, Migrator, PostgresDialect, sql, type MigrationResultSet } from 'kysely'
import pg from 'pg'
import { KyselyIdempotencyStore, idempotencyMigration } from '@acemq/store-kysely'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const table = process.env.IDEMPOTENCY_TABLE ?? 'acemq_idempotency_example'
const db = new Kysely<Record<string, never>>({
  dialect: new PostgresDialect({ pool: survivingRestarts(new pg.Pool({ connectionString: url })) }),
})

// Your migrations, with the idempotency table among them. (The migrator's own bookkeeping
// tables are named after the example's table, so it never touches your kysely_migration.)
const migrator = new Migrator({
  db,
  provider: {
    getMigrations: async () => ({
      '2025_01_01_acemq_idempotency': idempotencyMigration({ table }),
    }),
  },
  migrationTableName: `${table}_migration`,
  migrationLockTableName: `${table}_migration_lock`,
})

report('migrateToLatest', await migrator.migrateToLatest())

// The store works on the new table: claim an id, confirm it, and it is a duplicate from now on.
const store = new KyselyIdempotencyStore(db, { table })
console.log(`tryClaim('order-1') → ${await store.tryClaim('order-1')}`)
await store.confirm('order-1')
console.log(`confirm('order-1')`)
console.log(`tryClaim('order-1') → ${await store.tryClaim('order-1')}`)
await store.close()

report('migrateDown', await migrator.migrateDown())
const { rows } = await sql<{
  present: boolean
}>`select to_regclass(${table}) is not null as present`.execute(db)
console.log(`table ${table} exists: ${rows[0]?.present}`)

// Leave nothing behind: the migrator's bookkeeping tables are this example's own.
await sql`drop table if exists ${sql.table(`${table}_migration`)}, ${sql.table(`${table}_migration_lock`)}`.execute(
  db,
)
await db.destroy()

function report(step: string, { error, results }: MigrationResultSet): void {
  for (const result of results ?? []) {
    console.log(`${step}: ${result.migrationName} ${result.direction} ${result.status}`)
  }
  if (error !== undefined) throw error
}

/**
 * pg emits 'error' when Postgres drops a connection (a restart, a failover); without a
 * listener that ends the process. With one, claims fail for a moment and the pool reconnects.
 */
function survivingRestarts(pool: pg.Pool): pg.Pool {
  const warn = (error: Error): void => console.warn(`postgres connection lost: ${error.message}`)
  pool.on('error', warn)
  pool.on('connect', (client) => client.on('error', warn))
  return pool
}
