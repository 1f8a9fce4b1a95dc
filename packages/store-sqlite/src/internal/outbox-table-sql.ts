import { parseTableName } from './validate.js'

/** A validated outbox table name, quoted for SQLite, and the statements that create it. */
export interface SqliteOutboxTable {
  /** `"table"` or `"schema"."table"`. */
  readonly quoted: string
  /** The statements, one by one. */
  readonly statements: readonly string[]
  readonly ddl: string
}

function indexName(name: string, suffix: string): string {
  return `${name.slice(0, 63 - suffix.length)}${suffix}`
}

/** The outbox table on SQLite: the same DDL as `@acemq/store-kysely` writes for SQLite. */
export function sqliteOutboxTable(table: string): SqliteOutboxTable {
  const [schema, name] = parseTableName(table)
  const prefix = schema === undefined ? '' : `"${schema}".`
  const statements = [
    [
      `CREATE TABLE IF NOT EXISTS ${prefix}"${name}" (`,
      `  id TEXT NOT NULL PRIMARY KEY,`,
      `  exchange TEXT NOT NULL,`,
      `  routing_key TEXT NOT NULL,`,
      `  content_type TEXT NOT NULL,`,
      `  body BLOB NOT NULL,`,
      `  headers TEXT NOT NULL,`,
      `  envelope TEXT NOT NULL,`,
      `  created_at INTEGER NOT NULL,`,
      `  attempts INTEGER NOT NULL DEFAULT 0,`,
      `  last_error TEXT,`,
      `  lease_owner TEXT,`,
      `  leased_until INTEGER,`,
      `  published_at INTEGER,`,
      `  retired_at INTEGER`,
      `)`,
    ].join('\n'),
    `CREATE INDEX IF NOT EXISTS ${prefix}"${indexName(name, '_pending_idx')}" ON "${name}" (created_at) WHERE published_at IS NULL`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${indexName(name, '_published_idx')}" ON "${name}" (published_at) WHERE published_at IS NOT NULL`,
  ]
  return {
    quoted: `${prefix}"${name}"`,
    statements,
    ddl: `${statements.join(';\n')};\n`,
  }
}
