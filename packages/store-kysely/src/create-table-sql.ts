import { idempotencyTableStatements, sqlScript } from '@acemq/core/spi'
import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import { checkDialect, type IdempotencyDialect } from './idempotency-dialect.js'

/**
 * Options of {@link createTableSql}.
 *
 * @example
 * ```ts
 * const options: CreateTableSqlOptions = { table: 'app.seen_messages', dialect: 'postgres' }
 * ```
 */
export interface CreateTableSqlOptions {
  /** The table (default `acemq_idempotency`), optionally `schema.table`. */
  readonly table?: string
  /** The dialect to write the DDL for (default `postgres`). */
  readonly dialect?: IdempotencyDialect
}

/**
 * The DDL of the idempotency table, for your migrations: the library never runs DDL on its
 * own. It is the DDL every SQL idempotency store writes (`idempotencyTableStatements` of
 * `@acemq/core/spi`). Columns: `id` (text, primary key), `owner` (text), `claimed_at` (bigint epoch ms),
 * `confirmed` (boolean; 0/1 on SQLite), `confirmed_at` (bigint, null until confirmed), and
 * an index on `claimed_at` for the purge.
 *
 * @example
 * ```ts
 * console.log(createTableSql({ dialect: 'postgres' }))
 * ```
 */
export function createTableSql(options: CreateTableSqlOptions = {}): string {
  const dialect = checkDialect(options.dialect ?? 'postgres')
  return sqlScript(idempotencyTableStatements(options.table ?? DEFAULT_IDEMPOTENCY_TABLE, dialect))
}
