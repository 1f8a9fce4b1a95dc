import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import { checkDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { parseTableName } from './internal/validate.js'

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

const INDEX_SUFFIX = '_claimed_at_idx'

/**
 * The DDL of the idempotency table, for your migrations: the library never runs DDL on its
 * own. Columns: `id` (text, primary key), `owner` (text), `claimed_at` (bigint epoch ms),
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
  return `${createTableStatements(options.table ?? DEFAULT_IDEMPOTENCY_TABLE, dialect).join(';\n\n')};\n`
}

/** The statements of {@link createTableSql}, one by one (SQLite prepares one at a time). */
export function createTableStatements(table: string, dialect: IdempotencyDialect): string[] {
  const [schema, name] = parseTableName(table)
  const index = `${name.slice(0, 63 - INDEX_SUFFIX.length)}${INDEX_SUFFIX}`
  switch (dialect) {
    case 'postgres': {
      const qualified = schema === undefined ? `"${name}"` : `"${schema}"."${name}"`
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${qualified} (`,
          `  id text PRIMARY KEY,`,
          `  owner text NOT NULL,`,
          `  claimed_at bigint NOT NULL,`,
          `  confirmed boolean NOT NULL DEFAULT false,`,
          `  confirmed_at bigint`,
          `)`,
        ].join('\n'),
        `CREATE INDEX IF NOT EXISTS "${index}" ON ${qualified} (claimed_at)`,
      ]
    }
    case 'sqlite': {
      const prefix = schema === undefined ? '' : `"${schema}".`
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${prefix}"${name}" (`,
          `  id TEXT NOT NULL PRIMARY KEY,`,
          `  owner TEXT NOT NULL,`,
          `  claimed_at INTEGER NOT NULL,`,
          `  confirmed INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1)),`,
          `  confirmed_at INTEGER`,
          `)`,
        ].join('\n'),
        `CREATE INDEX IF NOT EXISTS ${prefix}"${index}" ON "${name}" (claimed_at)`,
      ]
    }
    case 'mysql': {
      const qualified = schema === undefined ? `\`${name}\`` : `\`${schema}\`.\`${name}\``
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${qualified} (`,
          // Bytes, not text: ids compare byte for byte, as they do on Postgres and SQLite. A
          // VARCHAR, even under utf8mb4_bin, pads: 'order-1 ' would collide with 'order-1'
          // and be acked as its duplicate. 255 bytes is the longest id the store accepts.
          `  id VARBINARY(255) NOT NULL PRIMARY KEY,`,
          `  owner VARCHAR(64) NOT NULL,`,
          `  claimed_at BIGINT NOT NULL,`,
          `  confirmed BOOLEAN NOT NULL DEFAULT FALSE,`,
          `  confirmed_at BIGINT NULL,`,
          `  INDEX \`${index}\` (claimed_at)`,
          `) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
        ].join('\n'),
      ]
    }
  }
}
