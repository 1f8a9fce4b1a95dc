import Sqlite from 'better-sqlite3'
import { ConfigurationError } from '@acemq/core'
import { DEFAULT_BUSY_TIMEOUT } from '../constants.js'

/** Whether `value` is a better-sqlite3 `Database` (by shape: another copy of the driver passes). */
export function isDatabase(value: unknown): value is Sqlite.Database {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Partial<Sqlite.Database>).prepare === 'function' &&
    typeof (value as Partial<Sqlite.Database>).transaction === 'function'
  )
}

/**
 * The database a store works on: given a path, the file opened in WAL mode with `busyTimeout`
 * (default {@link DEFAULT_BUSY_TIMEOUT}), which the store then owns and closes; given a
 * `Database`, that one, with `busyTimeout` set only when one was given, left to its owner.
 */
export function openDatabase(
  databaseOrPath: Sqlite.Database | string,
  busyTimeout: number | undefined,
): { readonly db: Sqlite.Database; readonly owned: boolean } {
  if (typeof databaseOrPath === 'string' && databaseOrPath !== '') {
    const db = new Sqlite(databaseOrPath, { timeout: busyTimeout ?? DEFAULT_BUSY_TIMEOUT })
    try {
      // WAL lets readers in other processes work while one of them writes.
      db.pragma('journal_mode = WAL')
    } catch (error) {
      db.close()
      throw error
    }
    return { db, owned: true }
  }
  if (isDatabase(databaseOrPath)) {
    if (busyTimeout !== undefined) databaseOrPath.pragma(`busy_timeout = ${busyTimeout}`)
    return { db: databaseOrPath, owned: false }
  }
  throw new ConfigurationError(
    `databaseOrPath must be a better-sqlite3 Database or a file path; got ${JSON.stringify(databaseOrPath) ?? String(databaseOrPath)}`,
  )
}
