import { SQL_DIALECTS, type SqlDialect } from './sql-dialect.js'
import { quotedTable } from './sql-names.js'

/** A column: its name, then its type and constraints on Postgres, SQLite and MySQL. */
export type ColumnDefinition = readonly [
  name: string,
  postgres: string,
  sqlite: string,
  mysql: string,
]

/**
 * The `id` column of the stores' tables, their primary key. Bytes on MySQL, not text: ids
 * compare byte for byte, as they do on Postgres and SQLite. A VARCHAR, even under utf8mb4_bin,
 * pads: 'order-1 ' would collide with 'order-1' (an idempotency store would ack it as its
 * duplicate). 255 bytes is the longest id the stores accept.
 */
export const ID_COLUMN: ColumnDefinition = [
  'id',
  'text PRIMARY KEY',
  'TEXT NOT NULL PRIMARY KEY',
  'VARBINARY(255) NOT NULL PRIMARY KEY',
]

/** An index: its name, its columns, and on Postgres and SQLite the rows it covers (a condition). */
export type IndexDefinition = readonly [name: string, columns: string, where?: string]

/** What one of the stores' tables is made of, on every dialect. */
export interface TableDefinition {
  readonly columns: readonly ColumnDefinition[]
  /** The indexes on Postgres and SQLite, each created after the table. */
  readonly indexes: readonly IndexDefinition[]
  /** The indexes on MySQL, declared inside the table (no condition there). */
  readonly mysqlIndexes: readonly IndexDefinition[]
}

/**
 * The statements that create the table `schema.name` (names already checked) on `dialect`, one
 * by one: `CREATE TABLE IF NOT EXISTS` with one definition a line, then each index — on MySQL
 * the indexes are declared inside the table, which compares its text byte for byte
 * (`utf8mb4_bin`).
 */
export function tableStatements(
  schema: string | undefined,
  name: string,
  dialect: SqlDialect,
  { columns, indexes, mysqlIndexes }: TableDefinition,
): string[] {
  const qualified = quotedTable(schema, name, dialect)
  const at = SQL_DIALECTS.indexOf(dialect) + 1
  const definitions = columns.map((column) => `${column[0]} ${column[at]}`)
  const create = (lines: readonly string[], after = ''): string =>
    [
      `CREATE TABLE IF NOT EXISTS ${qualified} (`,
      lines.map((l) => `  ${l}`).join(',\n'),
      `)${after}`,
    ].join('\n')
  const where = (condition: string | undefined): string =>
    condition === undefined ? '' : ` WHERE ${condition}`
  switch (dialect) {
    case 'postgres':
      return [
        create(definitions),
        ...indexes.map(
          ([index, on, rows]) =>
            `CREATE INDEX IF NOT EXISTS "${index}" ON ${qualified} (${on})${where(rows)}`,
        ),
      ]
    case 'sqlite': {
      // SQLite names the schema on the index, and the table alone after ON.
      const prefix = schema === undefined ? '' : `"${schema}".`
      return [
        create(definitions),
        ...indexes.map(
          ([index, on, rows]) =>
            `CREATE INDEX IF NOT EXISTS ${prefix}"${index}" ON "${name}" (${on})${where(rows)}`,
        ),
      ]
    }
    case 'mysql':
      return [
        create(
          [...definitions, ...mysqlIndexes.map(([index, on]) => `INDEX \`${index}\` (${on})`)],
          ' CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
        ),
      ]
  }
}
