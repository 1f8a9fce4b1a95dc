import { outboxTableStatements, parseTableName } from '@acemq/core/spi'

/** A validated outbox table name, quoted for SQLite, and the statements that create it. */
export interface SqliteOutboxTable {
  /** `"table"` or `"schema"."table"`. */
  readonly quoted: string
  /** The statements, one by one. */
  readonly statements: readonly string[]
  readonly ddl: string
}

/** The outbox table on SQLite: the DDL every SQL outbox store writes for SQLite (core's). */
export function sqliteOutboxTable(table: string): SqliteOutboxTable {
  const [schema, name] = parseTableName(table)
  const statements = outboxTableStatements(table, 'sqlite')
  return {
    quoted: schema === undefined ? `"${name}"` : `"${schema}"."${name}"`,
    statements,
    ddl: `${statements.join(';\n')};\n`,
  }
}
