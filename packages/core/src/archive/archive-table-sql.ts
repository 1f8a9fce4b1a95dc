import { parseTableName } from '../idempotency/store-validation.js'
import type { SqlDialect } from '../sql/sql-dialect.js'
import { tableStatements, type ColumnDefinition } from '../sql/sql-ddl.js'
import { indexName } from '../sql/sql-names.js'
import { DEFAULT_ARCHIVE_TABLE } from './archive-store.js'

/**
 * The DDL of a dead-letter archive's two tables in `dialect`: `{table}` for the messages and
 * `{table}_audit` for the audit log, with `IF NOT EXISTS` (on MySQL the indexes declared inside
 * each table) so a migration may run it twice.
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
  const archived = indexName(name, '_archived_idx')
  const byQueue = indexName(name, '_queue_idx')
  const auditAt = indexName(name, '_audit_at_idx')
  return [
    ...tableStatements(schema, name, dialect, {
      columns: MESSAGE_COLUMNS,
      indexes: [
        [archived, 'archived_at, id'],
        [byQueue, 'queue, archived_at'],
      ],
      mysqlIndexes: [
        [archived, 'archived_at, id'],
        [byQueue, 'queue, archived_at'],
      ],
    }),
    ...tableStatements(schema, `${name}_audit`, dialect, {
      columns: AUDIT_COLUMNS,
      indexes: [[auditAt, 'at']],
      mysqlIndexes: [[auditAt, 'at']],
    }),
  ]
}

const TEXT = ['TEXT', 'TEXT', 'LONGTEXT'] as const
const SHORT = ['VARCHAR(255)', 'VARCHAR(255)', 'VARCHAR(255)'] as const
const same = (type: string): readonly [string, string, string] => [type, type, type]
const column = (
  name: string,
  [postgres, sqlite, mysql]: readonly [string, string, string],
  nullable = false,
): ColumnDefinition => {
  const tail = nullable ? ' NULL' : ' NOT NULL'
  return [name, `${postgres}${tail}`, `${sqlite}${tail}`, `${mysql}${tail}`]
}

/** The messages table: times in epoch milliseconds, the body bytes, headers and properties wire JSON. */
const MESSAGE_COLUMNS: readonly ColumnDefinition[] = [
  ['id', 'VARCHAR(64) PRIMARY KEY', 'VARCHAR(64) PRIMARY KEY', 'VARCHAR(64) PRIMARY KEY'],
  ['archive_key', ...same('VARCHAR(64) NOT NULL UNIQUE')],
  column('queue', SHORT),
  column('message_id', TEXT),
  column('message_type', TEXT),
  column('reason', TEXT),
  column('attempt', same('INTEGER')),
  column('first_seen', same('BIGINT'), true),
  column('archived_at', same('BIGINT')),
  column('correlation_id', TEXT),
  column('traceparent', TEXT, true),
  column('exchange', SHORT),
  column('routing_key', SHORT),
  column('body', ['BYTEA', 'BLOB', 'LONGBLOB']),
  column('headers', TEXT),
  column('properties', TEXT),
  column('status', same('VARCHAR(16)')),
  column('status_at', same('BIGINT'), true),
  column('status_by', TEXT, true),
  column('replayed_to', SHORT, true),
]

/** The audit log: one row per action, its ids as JSON. */
const AUDIT_COLUMNS: readonly ColumnDefinition[] = [
  ['id', 'VARCHAR(64) PRIMARY KEY', 'VARCHAR(64) PRIMARY KEY', 'VARCHAR(64) PRIMARY KEY'],
  column('at', same('BIGINT')),
  column('actor', TEXT),
  column('action', same('VARCHAR(32)')),
  column('count', same('INTEGER')),
  column('ids', TEXT),
  column('detail', TEXT),
]

/** The columns of the messages table, in the order the stores select them. */
export const ARCHIVE_COLUMNS =
  'id, archive_key, queue, message_id, message_type, reason, attempt, first_seen, archived_at, correlation_id, traceparent, exchange, routing_key, body, headers, properties, status, status_at, status_by, replayed_to'
