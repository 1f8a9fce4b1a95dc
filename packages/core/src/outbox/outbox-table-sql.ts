import { parseTableName } from '../idempotency/store-validation.js'
import { ConfigurationError } from '../errors.js'
import type { SqlDialect } from '../sql/sql-dialect.js'
import { ID_COLUMN, tableStatements, type ColumnDefinition } from '../sql/sql-ddl.js'
import { indexName, quotedTable } from '../sql/sql-names.js'

const PENDING_SUFFIX = '_pending_idx'
const RETIRED_SUFFIX = '_retired_idx'
const PUBLISHED_SUFFIX = '_published_idx'

/**
 * The pending records, as the claim's condition names them: a partial index with exactly this
 * predicate is one Postgres uses for the claim even before the table has statistics (an index
 * on `published_at IS NULL` alone left it sorting the whole backlog for every batch).
 */
const PENDING = 'published_at IS NULL AND retired_at IS NULL'
/** The retired records (kept, listed, never offered again): few, so their index is small. */
const RETIRED = 'published_at IS NULL AND retired_at IS NOT NULL'

/** The outbox table's columns on Postgres, SQLite and MySQL. */
const OUTBOX_TABLE_COLUMNS: readonly ColumnDefinition[] = [
  ID_COLUMN,
  ['exchange', 'text NOT NULL', 'TEXT NOT NULL', 'VARCHAR(255) NOT NULL'],
  ['routing_key', 'text NOT NULL', 'TEXT NOT NULL', 'VARCHAR(255) NOT NULL'],
  ['content_type', 'text NOT NULL', 'TEXT NOT NULL', 'VARCHAR(255) NOT NULL'],
  ['body', 'bytea NOT NULL', 'BLOB NOT NULL', 'LONGBLOB NOT NULL'],
  ['headers', 'text NOT NULL', 'TEXT NOT NULL', 'MEDIUMTEXT NOT NULL'],
  ['envelope', 'text NOT NULL', 'TEXT NOT NULL', 'TEXT NOT NULL'],
  ['created_at', 'bigint NOT NULL', 'INTEGER NOT NULL', 'BIGINT NOT NULL'],
  [
    'attempts',
    'integer NOT NULL DEFAULT 0',
    'INTEGER NOT NULL DEFAULT 0',
    'INT NOT NULL DEFAULT 0',
  ],
  ['last_error', 'text', 'TEXT', 'TEXT NULL'],
  ['lease_owner', 'text', 'TEXT', 'VARCHAR(64) NULL'],
  ['leased_until', 'bigint', 'INTEGER', 'BIGINT NULL'],
  ['published_at', 'bigint', 'INTEGER', 'BIGINT NULL'],
  ['retired_at', 'bigint', 'INTEGER', 'BIGINT NULL'],
]

/**
 * The statements that create the outbox table on `dialect`, one by one — the table every SQL
 * outbox store reads and writes (the rows `outboxRecordFromRow` reads back): `id`
 * (primary key, the published message's id), `exchange`, `routing_key`, `content_type`,
 * `body` (bytes), `headers` and `envelope` (JSON text), `created_at` (epoch ms), `attempts`,
 * `last_error`, `lease_owner`, `leased_until`, `published_at`, `retired_at` (epoch ms, null
 * until then); on Postgres and SQLite an index on the pending records (neither published nor
 * retired) in the order a claim takes them, `(created_at, id)` — so a claim reads its batch off
 * the front of the index and sorts nothing, whatever the backlog and whether or not the table
 * has statistics yet — one on the retired records, and one on `published_at` for purging; on
 * MySQL one index on `(published_at, created_at)`. For store authors: stores never run it, they hand it to the application's
 * migrations.
 *
 * @example
 * ```ts
 * const ddl = `${outboxTableStatements('acemq_outbox', 'sqlite').join(';\n')};\n`
 * ```
 */
export function outboxTableStatements(table: string, dialect: SqlDialect): string[] {
  const [schema, name] = parseTableName(table)
  const pending = indexName(name, PENDING_SUFFIX)
  return tableStatements(schema, name, dialect, {
    columns: OUTBOX_TABLE_COLUMNS,
    indexes: [
      [pending, 'created_at, id', PENDING],
      [indexName(name, RETIRED_SUFFIX), 'retired_at', RETIRED],
      [indexName(name, PUBLISHED_SUFFIX), 'published_at', 'published_at IS NOT NULL'],
    ],
    mysqlIndexes: [[pending, 'published_at, created_at']],
  })
}

/** One SQL statement with its parameters, in the placeholders of its dialect. */
export interface OutboxStatement {
  readonly sql: string
  readonly parameters: readonly unknown[]
}

/** The table's name quoted for `dialect`, schema included. */
function quotedTableName(table: string, dialect: SqlDialect): string {
  const [schema, name] = parseTableName(table)
  return quotedTable(schema, name, dialect)
}

/** The `n`th placeholder (1-based) of `dialect`: `$n` on Postgres, `?` elsewhere. */
function placeholder(dialect: SqlDialect, n: number): string {
  return dialect === 'postgres' ? `$${n}` : '?'
}

/**
 * The statement that lists retired records, newest retirement first: the columns
 * `outboxRecordFromRow` / `retiredOutboxRecordFromRow` read. For tools that reach the table
 * through a driver of their own (the `acemq outbox retired` command).
 *
 * @example
 * ```ts
 * const { sql, parameters } = outboxRetiredStatement('acemq_outbox', 'postgres', 100)
 * ```
 */
export function outboxRetiredStatement(
  table: string,
  dialect: SqlDialect,
  limit: number,
): OutboxStatement {
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new ConfigurationError(`limit must be a whole number of at least 1; got ${String(limit)}`)
  }
  return {
    sql: `select id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts, last_error, retired_at from ${quotedTableName(table, dialect)} where ${RETIRED} order by retired_at desc, id limit ${limit}`,
    parameters: [],
  }
}

/**
 * The statement that puts retired records back — the ones named, or all of them: pending, no
 * attempts counted, offered at once (what a store's `reoffer` does). Its affected-row count is
 * how many it re-offered. For tools that reach the table through a driver of their own (the
 * `acemq outbox reoffer` command).
 *
 * @example
 * ```ts
 * const { sql, parameters } = outboxReofferStatement('acemq_outbox', 'sqlite', ['order-1'])
 * ```
 */
export function outboxReofferStatement(
  table: string,
  dialect: SqlDialect,
  ids?: readonly string[],
): OutboxStatement {
  if (
    ids !== undefined &&
    (ids.length === 0 || ids.some((id) => typeof id !== 'string' || id === ''))
  ) {
    throw new ConfigurationError(`ids must be record ids, at least one; got ${JSON.stringify(ids)}`)
  }
  const only =
    ids === undefined
      ? ''
      : ` and id in (${ids.map((_, i) => placeholder(dialect, i + 1)).join(', ')})`
  return {
    sql: `update ${quotedTableName(table, dialect)} set retired_at = null, attempts = 0, lease_owner = null, leased_until = null where ${RETIRED}${only}`,
    parameters: ids ?? [],
  }
}
