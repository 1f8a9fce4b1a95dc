import { parseTableName } from '../idempotency/store-validation.js'
import type { SqlDialect } from '../sql/sql-dialect.js'
import { indexName, quotedTable } from '../sql/sql-names.js'
import { DEFAULT_ARCHIVE_TABLE } from './archive-store.js'

/**
 * The DDL of a dead-letter archive's two tables in `dialect`: `{table}` for the messages and
 * `{table}_audit` for the audit log, with `IF NOT EXISTS` so a migration may run it twice.
 * Times are epoch milliseconds (`BIGINT`), the body is bytes, headers and properties wire JSON.
 *
 * @example
 * ```ts
 * for (const statement of archiveTableStatements('postgres')) await client.query(statement)
 * ```
 */
export function archiveTableStatements(
  dialect: SqlDialect,
  table: string = DEFAULT_ARCHIVE_TABLE,
): string[] {
  const [schema, name] = parseTableName(table)
  const messages = quotedTable(schema, name, dialect)
  const audit = quotedTable(schema, `${name}_audit`, dialect)
  const text = dialect === 'mysql' ? 'LONGTEXT' : 'TEXT'
  const bytes = dialect === 'postgres' ? 'BYTEA' : dialect === 'mysql' ? 'LONGBLOB' : 'BLOB'
  const short = 'VARCHAR(255)'
  const tail = dialect === 'mysql' ? ' DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin' : ''
  // MySQL has no `CREATE INDEX IF NOT EXISTS`: there the indexes are declared inside their
  // table, so that running the statements again changes nothing there either.
  const mysql = dialect === 'mysql'
  const index = (suffix: string, on: string, columns: string): string[] =>
    mysql
      ? []
      : [
          `CREATE INDEX IF NOT EXISTS ${quotedTable(undefined, indexName(name, suffix), dialect)} ON ${on} (${columns})`,
        ]
  const inside = (...declared: readonly (readonly [suffix: string, columns: string])[]): string =>
    mysql
      ? declared
          .map(([suffix, columns]) => `,\n  INDEX \`${indexName(name, suffix)}\` (${columns})`)
          .join('')
      : ''
  return [
    `CREATE TABLE IF NOT EXISTS ${messages} (
  id VARCHAR(64) PRIMARY KEY,
  archive_key VARCHAR(64) NOT NULL UNIQUE,
  queue ${short} NOT NULL,
  message_id ${text} NOT NULL,
  message_type ${text} NOT NULL,
  reason ${text} NOT NULL,
  attempt INTEGER NOT NULL,
  first_seen BIGINT NULL,
  archived_at BIGINT NOT NULL,
  correlation_id ${text} NOT NULL,
  traceparent ${text} NULL,
  exchange ${short} NOT NULL,
  routing_key ${short} NOT NULL,
  body ${bytes} NOT NULL,
  headers ${text} NOT NULL,
  properties ${text} NOT NULL,
  status VARCHAR(16) NOT NULL,
  status_at BIGINT NULL,
  status_by ${text} NULL,
  replayed_to ${short} NULL${inside(['_archived_idx', 'archived_at, id'], ['_queue_idx', 'queue, archived_at'])}
)${tail}`,
    ...index('_archived_idx', messages, 'archived_at, id'),
    ...index('_queue_idx', messages, 'queue, archived_at'),
    `CREATE TABLE IF NOT EXISTS ${audit} (
  id VARCHAR(64) PRIMARY KEY,
  at BIGINT NOT NULL,
  actor ${text} NOT NULL,
  action VARCHAR(32) NOT NULL,
  count INTEGER NOT NULL,
  ids ${text} NOT NULL,
  detail ${text} NOT NULL${inside(['_audit_at_idx', 'at'])}
)${tail}`,
    ...index('_audit_at_idx', audit, 'at'),
  ]
}

/** The columns of the messages table, in the order the stores select them. */
export const ARCHIVE_COLUMNS =
  'id, archive_key, queue, message_id, message_type, reason, attempt, first_seen, archived_at, correlation_id, traceparent, exchange, routing_key, body, headers, properties, status, status_at, status_by, replayed_to'
