import { MysqlAdapter, PostgresAdapter, SqliteAdapter } from 'kysely'
import { ConfigurationError } from '@acemq/core'
import { sqlDialect, type SqlDialect } from '@acemq/core/spi'
import type { KyselyDatabase } from './kysely-database.js'

/**
 * The SQL dialects the store writes: Postgres (tested, the default), SQLite (tested) and
 * MySQL 8 / MariaDB.
 *
 * @example
 * ```ts
 * new KyselyIdempotencyStore(db, { dialect: 'postgres' })
 * ```
 */
export type IdempotencyDialect = SqlDialect

const BY_ADAPTER_NAME: Readonly<Record<string, IdempotencyDialect>> = {
  PostgresAdapter: 'postgres',
  SqliteAdapter: 'sqlite',
  MysqlAdapter: 'mysql',
}

/**
 * Tells the dialect from the Kysely instance's adapter: Kysely's own adapters, and the
 * third-party dialects that reuse or extend them (PGlite, D1, libSQL, PlanetScale, ...).
 *
 * @example
 * ```ts
 * detectDialect(db) // 'postgres'
 * ```
 */
export function detectDialect(db: KyselyDatabase): IdempotencyDialect {
  const adapter: unknown = db.getExecutor().adapter
  if (adapter instanceof PostgresAdapter) return 'postgres'
  if (adapter instanceof SqliteAdapter) return 'sqlite'
  if (adapter instanceof MysqlAdapter) return 'mysql'
  // Another copy of kysely fails instanceof: fall back to the class names.
  for (
    let proto: unknown = Object.getPrototypeOf(adapter);
    proto;
    proto = Object.getPrototypeOf(proto)
  ) {
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
    const dialect = typeof name === 'string' ? BY_ADAPTER_NAME[name] : undefined
    if (dialect !== undefined) return dialect
  }
  const name = (adapter as { constructor?: { name?: unknown } } | null)?.constructor?.name
  throw new ConfigurationError(
    `dialect cannot be told from the Kysely adapter ${String(name ?? adapter)}: pass { dialect: 'postgres' | 'sqlite' | 'mysql' }`,
  )
}

/** Checks a `dialect` option (core's one list of dialects). */
export function checkDialect(dialect: unknown): IdempotencyDialect {
  return sqlDialect(dialect)
}
