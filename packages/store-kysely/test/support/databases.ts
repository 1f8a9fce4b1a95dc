import Database from 'better-sqlite3'
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type KyselyPlugin } from 'kysely'
import { createPool } from 'mysql2'
import pg from 'pg'
import { DATABASE_URL, MYSQL_URL } from '@acemq/testing'

/** A typed schema of the kind an application has: the store must accept it without a cast. */
export interface AppDatabase {
  orders: { id: string; total: number }
}

/** A Kysely instance on the test Postgres with its own pool. */
export function postgres(
  options: {
    readonly max?: number
    readonly pgOptions?: string
    readonly plugins?: KyselyPlugin[]
  } = {},
): Kysely<AppDatabase> {
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: options.max ?? 10,
    ...(options.pgOptions === undefined ? {} : { options: options.pgOptions }),
  })
  return new Kysely<AppDatabase>({
    dialect: new PostgresDialect({ pool }),
    ...(options.plugins === undefined ? {} : { plugins: options.plugins }),
  })
}

/** A Kysely instance on the test MySQL / MariaDB (`mysql2` pool, utf8mb4). */
export function mysql(options: { readonly max?: number } = {}): Kysely<AppDatabase> {
  const pool = createPool({
    uri: MYSQL_URL,
    connectionLimit: options.max ?? 10,
    charset: 'utf8mb4',
  })
  return new Kysely<AppDatabase>({ dialect: new MysqlDialect({ pool }) })
}

/** A Kysely instance on a SQLite file, through its own better-sqlite3 connection (WAL). */
export function sqlite(path: string): Kysely<AppDatabase> {
  const database = new Database(path)
  database.pragma('journal_mode = WAL')
  return new Kysely<AppDatabase>({ dialect: new SqliteDialect({ database }) })
}

/** A table name no other test (or earlier run) uses. */
export function uniqueTable(prefix = 'acemq_idem'): string {
  return `${prefix}_${Math.random().toString(36).slice(2, 10)}`
}
