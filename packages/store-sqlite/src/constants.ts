/** The table the SQLite idempotency store uses unless told otherwise. */
export const DEFAULT_IDEMPOTENCY_TABLE = 'acemq_idempotency'

/** How long a write waits for another connection's lock before failing (5 s). */
export const DEFAULT_BUSY_TIMEOUT = 5_000

/** Expired rows are purged on every this-many-th claim (100). */
export const DEFAULT_PURGE_EVERY = 100

/** One purge deletes at most this many expired rows (1000), so it never holds the lock long. */
export const DEFAULT_PURGE_BATCH_SIZE = 1_000
