/** The table the Kysely idempotency store uses unless told otherwise. */
export const DEFAULT_IDEMPOTENCY_TABLE = 'acemq_idempotency'

/** Expired rows are purged on every this-many-th claim (100). */
export const DEFAULT_PURGE_EVERY = 100

/** One purge deletes at most this many expired rows (1000), so it never holds locks long. */
export const DEFAULT_PURGE_BATCH_SIZE = 1_000
