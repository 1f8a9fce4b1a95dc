import { createRequire } from 'node:module'

// @types/better-sqlite3 is not among the bench package's dependencies, so this is the typed
// slice of better-sqlite3 the benchmark drives directly (the store brings its own types).

export interface SqliteStatement {
  run(...params: unknown[]): { readonly changes: number }
}

export interface SqliteDatabase {
  pragma(source: string): unknown
  exec(source: string): this
  prepare(source: string): SqliteStatement
  close(): this
}

type SqliteConstructor = new (
  path: string,
  options?: { readonly timeout?: number },
) => SqliteDatabase

/** better-sqlite3's `Database`. */
export const Database = createRequire(import.meta.url)('better-sqlite3') as SqliteConstructor
