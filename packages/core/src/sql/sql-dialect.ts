import { ConfigurationError } from '../errors.js'

/**
 * The SQL dialects the shipped stores write: Postgres, SQLite, and MySQL 8 / MariaDB.
 *
 * @example
 * ```ts
 * const dialect: SqlDialect = 'postgres'
 * ```
 */
export type SqlDialect = 'postgres' | 'sqlite' | 'mysql'

/**
 * Every {@link SqlDialect}: the one list the stores check a `dialect` option against and the
 * cli offers (docs/design.md §1).
 *
 * @example
 * ```ts
 * SQL_DIALECTS.includes('mysql') // true
 * ```
 */
export const SQL_DIALECTS: readonly SqlDialect[] = Object.freeze(['postgres', 'sqlite', 'mysql'])

/**
 * Checks a dialect option: one of {@link SQL_DIALECTS}, or a `ConfigurationError` that names
 * the option and the value it got.
 *
 * @example
 * ```ts
 * sqlDialect(options.dialect ?? 'postgres') // 'postgres'
 * sqlDialect('oracle') // throws: dialect must be one of 'postgres', 'sqlite', 'mysql'; got "oracle"
 * ```
 */
export function sqlDialect(value: unknown, name = 'dialect'): SqlDialect {
  if (!SQL_DIALECTS.includes(value as SqlDialect)) {
    throw new ConfigurationError(
      `${name} must be one of ${SQL_DIALECTS.map((d) => `'${d}'`).join(', ')}; got ${JSON.stringify(value) ?? String(value)}`,
    )
  }
  return value as SqlDialect
}

/**
 * Table statements as one script for a migration: each statement ends with `;`, a blank line
 * between two.
 *
 * @example
 * ```ts
 * sqlScript(idempotencyTableStatements('acemq_idempotency', 'postgres'))
 * ```
 */
export function sqlScript(statements: readonly string[]): string {
  return `${statements.join(';\n\n')};\n`
}
