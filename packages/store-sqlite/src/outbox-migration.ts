import { randomUUID } from 'node:crypto'
import { DEFAULT_OUTBOX_TABLE } from '@acemq/core/spi'
import { sqliteOutboxTable } from './internal/outbox-table-sql.js'

/**
 * The slice of a Kysely instance the migration uses: any `Kysely<DB>` on SQLite fits, and
 * this package needs no Kysely of its own.
 */
export interface KyselyMigrationDatabase {
  // `never`: any Kysely's executeQuery fits, whatever its own query types are.
  executeQuery(query: never): Promise<unknown>
}

/** A raw statement as Kysely compiles one (`CompiledQuery.raw`). */
interface RawQuery {
  readonly sql: string
  readonly parameters: readonly unknown[]
  readonly query: {
    readonly kind: 'RawNode'
    readonly sqlFragments: readonly string[]
    readonly parameters: readonly unknown[]
  }
  readonly queryId: { readonly queryId: string }
}

/** A Kysely migration: `up` creates the table, `down` drops it. Fits `Migrator`'s `Migration`. */
export interface SqliteOutboxMigration {
  up(db: KyselyMigrationDatabase): Promise<void>
  down(db: KyselyMigrationDatabase): Promise<void>
}

function raw(statement: string): never {
  return {
    sql: statement,
    parameters: [],
    query: { kind: 'RawNode', sqlFragments: [statement], parameters: [] },
    queryId: { queryId: randomUUID() },
  } satisfies RawQuery as never
}

/**
 * A migration that creates the SQLite outbox table (the DDL of
 * `SqliteOutboxStore.createTableSql()`), for a Kysely `Migrator` on the same file.
 *
 * @example
 * ```ts
 * const migrator = new Migrator({ db, provider: { getMigrations: async () => ({
 *   '2025_01_02_acemq_outbox': outboxMigration(),
 * }) } })
 * ```
 */
export function outboxMigration(options: { readonly table?: string } = {}): SqliteOutboxMigration {
  const table = sqliteOutboxTable(options.table ?? DEFAULT_OUTBOX_TABLE)
  return {
    async up(db) {
      for (const statement of table.statements) await db.executeQuery(raw(statement))
    },
    async down(db) {
      await db.executeQuery(raw(`DROP TABLE IF EXISTS ${table.quoted}`))
    },
  }
}
