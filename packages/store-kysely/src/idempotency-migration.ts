import { idempotencyTableStatements } from '@acemq/core/spi'
import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import type { IdempotencyDialect } from './idempotency-dialect.js'
import { tableMigration } from './internal/table-migration.js'
import type { KyselyDatabase } from './kysely-database.js'

/**
 * A Kysely migration: `up` creates the idempotency table and its index, `down` drops the
 * table. Fits `Migrator`'s `Migration` type.
 *
 * @example
 * ```ts
 * const migration: IdempotencyMigration = idempotencyMigration()
 * ```
 */
export interface IdempotencyMigration {
  up(db: KyselyDatabase): Promise<void>
  down(db: KyselyDatabase): Promise<void>
}

/**
 * A migration that creates the idempotency table (the same DDL as `createTableSql`), for a
 * Kysely `Migrator`. The dialect is told from the database the migrator passes, unless
 * given.
 *
 * @example
 * ```ts
 * const migrator = new Migrator({ db, provider: { getMigrations: async () => ({
 *   '2025_01_01_acemq_idempotency': idempotencyMigration(),
 * }) } })
 * ```
 */
export function idempotencyMigration(
  options: { readonly table?: string; readonly dialect?: IdempotencyDialect } = {},
): IdempotencyMigration {
  return tableMigration(options, DEFAULT_IDEMPOTENCY_TABLE, idempotencyTableStatements)
}
