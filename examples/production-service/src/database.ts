import { Kysely, Migrator, PostgresDialect } from 'kysely'
import pg from 'pg'
import { idempotencyMigration } from '@acemq/store-kysely'

/** The application's own tables (the store needs none of them: any `Kysely<DB>` will do). */
export interface Database {
  shipments: { order_id: string; shipped_at: Date }
}

/** A Kysely instance on a pg pool that survives Postgres restarts. */
export function openDatabase(url: string): { db: Kysely<Database>; pool: pg.Pool } {
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  // pg emits 'error' when Postgres drops a connection (a restart, a failover); without a
  // listener that ends the process. With one, claims fail for a moment (the consumer puts those
  // messages back) and the pool reconnects.
  const warn = (error: Error): void => console.warn(`postgres connection lost: ${error.message}`)
  pool.on('error', warn)
  pool.on('connect', (client) => client.on('error', warn))
  return { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), pool }
}

/**
 * The service's migrations, with the idempotency table among them: the store never runs DDL.
 * `table` names it; the migrator's bookkeeping tables are named after it.
 */
export function migrator(db: Kysely<Database>, table: string): Migrator {
  return new Migrator({
    db,
    provider: {
      getMigrations: async () => ({
        '2025_01_01_acemq_idempotency': idempotencyMigration({ table }),
      }),
    },
    migrationTableName: `${table}_migration`,
    migrationLockTableName: `${table}_migration_lock`,
  })
}
