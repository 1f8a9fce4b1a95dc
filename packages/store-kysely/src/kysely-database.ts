/**
 * The slice of Kysely the stores use, declared here rather than imported: any `Kysely<DB>` (or
 * transaction) fits, whatever your `DB` type — and whichever of kysely's two builds your project
 * resolves. kysely ships separate CommonJS and ES module types whose classes have `#private`
 * members, so a CommonJS project's `Kysely` is not the ES module `Kysely` this package is built
 * against; a parameter typed with kysely's own classes would refuse it. Pass the instance, not a
 * transaction, to a store: a claim made inside your transaction is invisible to other consumers
 * until it commits.
 *
 * @example
 * ```ts
 * const db: KyselyDatabase = new Kysely<MyDatabase>({ dialect })
 * ```
 */
export interface KyselyDatabase {
  getExecutor(): KyselyExecutor
}

/**
 * What the stores read of a Kysely executor: its dialect adapter (to tell the dialect) and a
 * copy without plugins (to run their own SQL unchanged). Everything else they need of it is
 * reached through kysely at run time.
 *
 * @example
 * ```ts
 * const adapter = db.getExecutor().adapter
 * ```
 */
export interface KyselyExecutor {
  readonly adapter: object
  withoutPlugins(): object
}
