import type { QueryExecutor } from 'kysely'

/**
 * The slice of Kysely the store needs: any `Kysely<DB>` fits, whatever your `DB` type, so
 * a typed instance is passed without a cast. Pass the instance, not a transaction: a claim
 * made inside your transaction is invisible to other consumers until it commits.
 *
 * @example
 * ```ts
 * const db: KyselyDatabase = new Kysely<MyDatabase>({ dialect })
 * ```
 */
export interface KyselyDatabase {
  getExecutor(): QueryExecutor
}
