import type { SqlDialect } from './sql-dialect.js'

/**
 * A table's name quoted for `dialect`: `"schema"."name"` on Postgres and SQLite,
 * `` `schema`.`name` `` on MySQL; the schema left out when there is none. The parts are
 * checked before (`parseTableName`), so they need no escaping.
 */
export function quotedTable(schema: string | undefined, name: string, dialect: SqlDialect): string {
  const quote = dialect === 'mysql' ? '`' : '"'
  const quoted = `${quote}${name}${quote}`
  return schema === undefined ? quoted : `${quote}${schema}${quote}.${quoted}`
}

/** An index name the table's name leads, cut so it stays within 63 characters. */
export function indexName(name: string, suffix: string): string {
  return `${name.slice(0, 63 - suffix.length)}${suffix}`
}
