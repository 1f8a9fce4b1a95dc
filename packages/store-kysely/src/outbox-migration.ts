import { DEFAULT_OUTBOX_TABLE, outboxTableStatements } from '@acemq/core/spi'
import type { IdempotencyDialect } from './idempotency-dialect.js'
import type { IdempotencyMigration } from './idempotency-migration.js'
import { tableMigration } from './internal/table-migration.js'

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
  return tableMigration(options, DEFAULT_OUTBOX_TABLE, outboxTableStatements)
}
