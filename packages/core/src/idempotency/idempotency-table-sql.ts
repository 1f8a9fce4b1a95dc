import type { SqlDialect } from '../sql/sql-dialect.js'
import { ID_COLUMN, tableStatements, type ColumnDefinition } from '../sql/sql-ddl.js'
import { indexName } from '../sql/sql-names.js'
import { parseTableName } from './store-validation.js'

const INDEX_SUFFIX = '_claimed_at_idx'

/** The idempotency table's columns on Postgres, SQLite and MySQL. */
const IDEMPOTENCY_COLUMNS: readonly ColumnDefinition[] = [
  ID_COLUMN,
  ['owner', 'text NOT NULL', 'TEXT NOT NULL', 'VARCHAR(64) NOT NULL'],
  ['claimed_at', 'bigint NOT NULL', 'INTEGER NOT NULL', 'BIGINT NOT NULL'],
  [
    'confirmed',
    'boolean NOT NULL DEFAULT false',
    'INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1))',
    'BOOLEAN NOT NULL DEFAULT FALSE',
  ],
  ['confirmed_at', 'bigint', 'INTEGER', 'BIGINT NULL'],
]

/**
 * The statements that create the idempotency table on `dialect`, one by one (SQLite prepares
 * one at a time) — the table every SQL idempotency store claims in: `id` (primary key, compared
 * byte for byte), `owner`, `claimed_at` (epoch ms), `confirmed`, `confirmed_at` (epoch ms, null
 * until confirmed), and an index on `claimed_at` for the purge. For store authors: stores never
 * run it, they hand it to the application's migrations.
 *
 * @example
 * ```ts
 * const ddl = `${idempotencyTableStatements('acemq_idempotency', 'sqlite').join(';\n')};\n`
 * ```
 */
export function idempotencyTableStatements(table: string, dialect: SqlDialect): string[] {
  const [schema, name] = parseTableName(table)
  const index = indexName(name, INDEX_SUFFIX)
  return tableStatements(schema, name, dialect, {
    columns: IDEMPOTENCY_COLUMNS,
    indexes: [[index, 'claimed_at']],
    mysqlIndexes: [[index, 'claimed_at']],
  })
}

/** A column of an existing table, as the database describes it: its name and declared type. */
export interface TableColumn {
  readonly name: string
  readonly type: string
}

/**
 * The layouts the AceMQ libraries give a table named `acemq_idempotency` (docs/design.md §7):
 * this library's, the Java and Ruby one (timestamps), the Python one (the same columns in epoch
 * milliseconds), the .NET one and the Go one.
 */
export type IdempotencyTableLayout = 'typescript' | 'java-ruby' | 'python' | 'dotnet' | 'go'

/** The columns this library's stores read and write. */
const OWN_COLUMNS = ['id', 'owner', 'claimed_at', 'confirmed', 'confirmed_at'] as const

/** Each other library's columns, and the words that name it in an error. */
const FOREIGN_LAYOUTS: readonly {
  readonly layout: Exclude<IdempotencyTableLayout, 'typescript'>
  readonly columns: readonly string[]
  readonly library: string
}[] = [
  {
    layout: 'java-ruby',
    columns: ['message_id', 'state', 'claimed_by', 'recorded_at', 'expires_at'],
    library: 'the Java / Ruby AceMQ library',
  },
  {
    layout: 'python',
    columns: ['message_id', 'state', 'claimed_by', 'recorded_at', 'expires_at'],
    library: 'the Python AceMQ library',
  },
  {
    layout: 'dotnet',
    columns: ['message_id', 'claimed_at', 'confirmed'],
    library: 'the .NET AceMQ library',
  },
  { layout: 'go', columns: ['key', 'handled_at', 'confirmed'], library: 'the Go AceMQ library' },
]

/**
 * Which AceMQ library's layout a table has, from its columns; undefined when it is none of
 * them. The Java / Ruby and Python layouts share their column names and differ in the type of
 * `recorded_at`: a timestamp, or an integer of epoch milliseconds. For store authors: a store
 * whose `verify()` finds its columns missing names the layout it found instead.
 *
 * @example
 * ```ts
 * idempotencyTableLayout([{ name: 'key', type: 'text' }, { name: 'handled_at', type: 'timestamp' }, { name: 'confirmed', type: 'boolean' }]) // 'go'
 * ```
 */
export function idempotencyTableLayout(
  columns: readonly TableColumn[],
): IdempotencyTableLayout | undefined {
  const byName = new Map(columns.map((column) => [column.name.toLowerCase(), column.type]))
  const has = (names: readonly string[]): boolean => names.every((name) => byName.has(name))
  if (has(OWN_COLUMNS)) return 'typescript'
  for (const { layout, columns: names } of FOREIGN_LAYOUTS) {
    if (!has(names)) continue
    if (layout === 'java-ruby' || layout === 'python') {
      const integer = /int/i.test(byName.get('recorded_at') ?? '')
      return integer ? 'python' : 'java-ruby'
    }
    return layout
  }
  return undefined
}

/**
 * Why a store cannot use the existing table `table` whose columns are `columns`, in words: the
 * AceMQ library whose layout it has (or the columns it lacks), and the remedy — another table
 * name for this store. Undefined when the table has this library's columns, or none were found.
 *
 * @example
 * ```ts
 * const why = foreignIdempotencyTable('acemq_idempotency', columns)
 * if (why !== undefined) throw new AceMqError(why, { code: ErrorCodes.STORE_TABLE_MISSING })
 * ```
 */
export function foreignIdempotencyTable(
  table: string,
  columns: readonly TableColumn[],
): string | undefined {
  const layout = idempotencyTableLayout(columns)
  // No columns: the table was not found where the store looked (another schema on the search
  // path, no privilege to see it), so nothing can be said about it.
  if (layout === 'typescript' || columns.length === 0) return undefined
  const found = columns.map((column) => column.name).join(', ')
  const remedy = `give this store a table of its own ({ table: '${suggestedTable(table)}' }) and create it with createTableSql(); a table's layout is never changed in place`
  const library = FOREIGN_LAYOUTS.find((candidate) => candidate.layout === layout)?.library
  return library === undefined
    ? `the idempotency table ${table} exists without the columns this store uses (${OWN_COLUMNS.join(', ')}); it has ${found}: ${remedy}`
    : `the idempotency table ${table} has the layout of ${library} (${found}), not this library's (${OWN_COLUMNS.join(', ')}): another service in this database created it. ${capitalised(remedy)}`
}

function suggestedTable(table: string): string {
  const [schema, name] = parseTableName(table)
  const suggestion = `${name.slice(0, 60)}_ts`
  return schema === undefined ? suggestion : `${schema}.${suggestion}`
}

function capitalised(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`
}
