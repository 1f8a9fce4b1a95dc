import { sql } from 'kysely'
import { DEFAULT_OUTBOX_TABLE, outboxTableStatements, parseTableName } from '@acemq/core/spi'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import type { IdempotencyMigration } from './idempotency-migration.js'
import { executorProvider } from './internal/executor.js'

/**
 * A migration that creates the outbox table and its indexes (the same DDL as
 * `createOutboxTableSql`), for a Kysely `Migrator`; `down` drops the table. The dialect is
 * told from the database the migrator passes, unless given.
 *
 * @example
 * ```ts
 * const migrator = new Migrator({ db, provider: { getMigrations: async () => ({
 *   '2025_01_02_acemq_outbox': outboxMigration(),
 * }) } })
 * ```
 */
export function outboxMigration(
  options: { readonly table?: string; readonly dialect?: IdempotencyDialect } = {},
): IdempotencyMigration {
  const table = options.table ?? DEFAULT_OUTBOX_TABLE
  parseTableName(table)
  const dialect = options.dialect === undefined ? undefined : checkDialect(options.dialect)
  return {
    async up(db) {
      for (const statement of outboxTableStatements(table, dialect ?? detectDialect(db))) {
        await sql.raw(statement).execute(executorProvider(db))
      }
    },
    async down(db) {
      await sql`DROP TABLE IF EXISTS ${sql.table(table)}`.execute(executorProvider(db))
    },
  }
}
