import { sql, type QueryExecutor } from 'kysely'
import { AceMqError, ErrorCodes } from '@acemq/core'
import {
  foreignIdempotencyTable,
  isMissingTableError,
  parseTableName,
  type TableColumn,
} from '@acemq/core/spi'
import type { IdempotencyDialect } from './idempotency-dialect.js'
import { run } from './internal/prepared.js'

// What the Kysely idempotency store says when its table is not the one it needs: missing, or
// another AceMQ library's table of the same name (docs/design.md §7).

/** Where a store's table lives, and how to reach it. */
export interface StoreTable {
  readonly table: string
  readonly dialect: IdempotencyDialect
  readonly executor: QueryExecutor
}

/**
 * `error` said in words when it is about the table: a missing table with the way to create it,
 * and a table without this store's columns with the AceMQ library whose layout it has and the
 * remedy (docs/design.md §7). Any other error, or one whose table cannot be looked into, as it is.
 */
export async function explainTableTrouble(error: unknown, where: StoreTable): Promise<unknown> {
  if (isMissingTableError(error)) {
    return new AceMqError(
      `the idempotency table ${where.table} does not exist: create it in a migration, with idempotencyMigration() or store.createTableSql()`,
      { code: ErrorCodes.STORE_TABLE_MISSING, cause: error },
    )
  }
  if (!isMissingColumn(error)) return error
  let columns: TableColumn[]
  try {
    columns = await tableColumns(where)
  } catch {
    // The table cannot be described: the database's own error says the most.
    return error
  }
  const foreign = foreignIdempotencyTable(where.table, columns)
  return foreign === undefined
    ? error
    : new AceMqError(foreign, { code: ErrorCodes.STORE_TABLE_MISSING, cause: error })
}

/** The columns of the store's table and their declared types, as the database lists them. */
export async function tableColumns(where: StoreTable): Promise<TableColumn[]> {
  const [schema, name] = parseTableName(where.table)
  const query =
    where.dialect === 'postgres'
      ? sql`select column_name as name, data_type as type from information_schema.columns where table_schema = ${schema === undefined ? sql`current_schema()` : schema} and table_name = ${name} order by ordinal_position`
      : where.dialect === 'mysql'
        ? sql`select column_name as name, column_type as type from information_schema.columns where table_schema = ${schema === undefined ? sql`database()` : schema} and table_name = ${name} order by ordinal_position`
        : sql`select name, type from pragma_table_info(${name}, ${schema ?? 'main'}) order by cid`
  const { rows } = await run<{ name: unknown; type: unknown }>(
    where.executor,
    query.compile({ getExecutor: () => where.executor }),
  )
  return rows.map((row) => ({ name: String(row.name), type: String(row.type) }))
}

/**
 * Whether the database said a column the store names does not exist: Postgres `42703`, MySQL /
 * MariaDB `ER_BAD_FIELD_ERROR` (1054), SQLite's `no such column` and `has no column named`.
 */
function isMissingColumn(error: unknown): boolean {
  const { code, errno, message } = fields(error)
  return (
    code === '42703' ||
    code === 'ER_BAD_FIELD_ERROR' ||
    errno === 1054 ||
    (typeof message === 'string' && /no such column|has no column named/i.test(message))
  )
}

function fields(error: unknown): { code?: unknown; errno?: unknown; message?: unknown } {
  return (error ?? {}) as { code?: unknown; errno?: unknown; message?: unknown }
}
