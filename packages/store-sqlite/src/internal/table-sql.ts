import { idempotencyTableStatements, parseTableName } from '@acemq/core/spi'

/** A validated table name, quoted for SQLite, and the statements that create it. */
export interface SqliteTable {
  /** `"table"` or `"schema"."table"`. */
  readonly quoted: string
  readonly ddl: string
}

/** Builds the quoted name and the DDL of an idempotency table on SQLite (core's, for SQLite). */
export function sqliteTable(table: string): SqliteTable {
  const [schema, name] = parseTableName(table)
  const prefix = schema === undefined ? '' : `"${schema}".`
  const ddl = `${idempotencyTableStatements(table, 'sqlite').join(';\n')};\n`
  return { quoted: `${prefix}"${name}"`, ddl }
}
