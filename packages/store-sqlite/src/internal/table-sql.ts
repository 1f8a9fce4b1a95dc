import { parseTableName } from './validate.js'

const INDEX_SUFFIX = '_claimed_at_idx'

/** A validated table name, quoted for SQLite, and the statements that create it. */
export interface SqliteTable {
  /** `"table"` or `"schema"."table"`. */
  readonly quoted: string
  readonly ddl: string
}

/** Builds the quoted name and the DDL of an idempotency table on SQLite. */
export function sqliteTable(table: string): SqliteTable {
  const [schema, name] = parseTableName(table)
  const prefix = schema === undefined ? '' : `"${schema}".`
  const index = `${name.slice(0, 63 - INDEX_SUFFIX.length)}${INDEX_SUFFIX}`
  const ddl = [
    `CREATE TABLE IF NOT EXISTS ${prefix}"${name}" (`,
    `  id TEXT NOT NULL PRIMARY KEY,`,
    `  owner TEXT NOT NULL,`,
    `  claimed_at INTEGER NOT NULL,`,
    `  confirmed INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1)),`,
    `  confirmed_at INTEGER`,
    `);`,
    `CREATE INDEX IF NOT EXISTS ${prefix}"${index}" ON "${name}" (claimed_at);`,
    '',
  ].join('\n')
  return { quoted: `${prefix}"${name}"`, ddl }
}
