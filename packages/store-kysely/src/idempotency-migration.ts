import { sql } from 'kysely'
import { idempotencyTableStatements, parseTableName } from '@acemq/core/spi'
import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { executorProvider } from './internal/executor.js'
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
  const table = options.table ?? DEFAULT_IDEMPOTENCY_TABLE
  parseTableName(table)
  const dialect = options.dialect === undefined ? undefined : checkDialect(options.dialect)
  return {
    async up(db) {
      for (const statement of idempotencyTableStatements(table, dialect ?? detectDialect(db))) {
        await sql.raw(statement).execute(executorProvider(db))
      }
    },
    async down(db) {
      await sql`DROP TABLE IF EXISTS ${sql.table(table)}`.execute(executorProvider(db))
    },
  }
}
