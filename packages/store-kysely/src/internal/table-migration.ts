import { sql } from 'kysely'
import { parseTableName } from '@acemq/core/spi'
import { checkDialect, detectDialect, type IdempotencyDialect } from '../idempotency-dialect.js'
import type { KyselyDatabase } from '../kysely-database.js'
import { executorProvider } from './executor.js'

/**
 * The migration of one of the stores' tables: `up` runs the table's statements (in the dialect
 * given, else the one told from the Kysely adapter), `down` drops the table.
 */
export function tableMigration(
  options: { readonly table?: string; readonly dialect?: IdempotencyDialect },
  defaultTable: string,
  statementsOf: (table: string, dialect: IdempotencyDialect) => readonly string[],
): { up(db: KyselyDatabase): Promise<void>; down(db: KyselyDatabase): Promise<void> } {
  const table = options.table ?? defaultTable
  parseTableName(table)
  const dialect = options.dialect === undefined ? undefined : checkDialect(options.dialect)
  return {
    async up(db) {
      for (const statement of statementsOf(table, dialect ?? detectDialect(db))) {
        await sql.raw(statement).execute(executorProvider(db))
      }
    },
    async down(db) {
      await sql`DROP TABLE IF EXISTS ${sql.table(table)}`.execute(executorProvider(db))
    },
  }
}
