import { toMillis, type Duration } from '../duration.js'
import { ConfigurationError } from '../errors.js'

/** A lone surrogate cannot be written as UTF-8, so two different ids could become one key. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/** A plain SQL identifier, optionally schema-qualified: nothing that needs escaping anywhere. */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/

/**
 * Refuses an idempotency key that is not non-empty UTF-8 text (no NUL, no lone surrogate) of
 * at most 255 bytes, so every store keys on the same text and a bad id never reaches a database. For store
 * authors.
 *
 * @example
 * ```ts
 * async claim(id: string) { assertIdempotencyKey(id); ... }
 * ```
 */
export function assertIdempotencyKey(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0) {
    throw new ConfigurationError(
      `id must be a non-empty string; got ${typeof id === 'string' ? '""' : describeValue(id)}`,
    )
  }
  if (id.includes('\u0000') || LONE_SURROGATE.test(id)) {
    throw new ConfigurationError(
      `id must be valid UTF-8 text without NUL characters; got ${JSON.stringify(id)}`,
    )
  }
  if (Buffer.byteLength(id) > MAX_KEY_BYTES) {
    throw new ConfigurationError(
      `id must be at most ${MAX_KEY_BYTES} bytes of UTF-8, as a message id is; got ${Buffer.byteLength(id)} bytes`,
    )
  }
}

/**
 * Refuses an owner token that is neither omitted (`undefined`) nor 1 to 64 visible ASCII
 * characters (`!` to `~`; a UUID fits), so every store records the same token: MySQL keeps
 * owners in a `VARCHAR(64)` whose collation ignores trailing spaces, which would make `'a '`
 * the owner of `'a'`'s claim. For store authors.
 *
 * @example
 * ```ts
 * async release(id: string, owner?: string) { assertIdempotencyKey(id); assertOwnerToken(owner); ... }
 * ```
 */
export function assertOwnerToken(owner: unknown): asserts owner is string | undefined {
  if (owner === undefined) return
  if (typeof owner !== 'string' || !OWNER_TOKEN.test(owner)) {
    throw new ConfigurationError(
      `owner must be 1 to 64 visible ASCII characters (a UUID fits), or omitted; got ${typeof owner === 'string' ? JSON.stringify(owner) : describeValue(owner)}`,
    )
  }
}

/** An owner token: what fits every store's owner column and compares byte for byte everywhere. */
const OWNER_TOKEN = /^[\x21-\x7E]{1,64}$/

/** The longest idempotency key: a message id, which AMQP caps at 255 bytes. */
const MAX_KEY_BYTES = 255

/**
 * Checks an SQL table name — letters, digits and `_`, at most 63, optionally `schema.table`,
 * nothing that would need quoting — and splits it into `[schema, table]`. For SQL stores.
 *
 * @example
 * ```ts
 * parseTableName('audit.acemq_idempotency') // ['audit', 'acemq_idempotency']
 * ```
 */
export function parseTableName(
  table: unknown,
  argument = 'table',
): readonly [string | undefined, string] {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new ConfigurationError(
      `${argument} must be an SQL identifier (letters, digits and _, at most 63, not starting with a digit), optionally schema-qualified as 'schema.table'; got ${JSON.stringify(table) ?? String(table)}`,
    )
  }
  const dot = table.indexOf('.')
  return dot < 0 ? [undefined, table] : [table.slice(0, dot), table.slice(dot + 1)]
}

/**
 * A duration option that must be longer than zero, in milliseconds.
 *
 * @example
 * ```ts
 * positiveMillis(options.claimTimeout ?? DEFAULT_CLAIM_TIMEOUT, 'claimTimeout')
 * ```
 */
export function positiveMillis(value: Duration, name: string): number {
  const ms = toMillis(value, name)
  if (ms <= 0) {
    throw new ConfigurationError(`${name} must be longer than 0 ms; got ${JSON.stringify(value)}`)
  }
  return ms
}

/**
 * An integer option with a lower bound. For store authors.
 *
 * @example
 * ```ts
 * integerAtLeast(options.purgeBatchSize ?? DEFAULT_PURGE_BATCH_SIZE, 1, 'purgeBatchSize')
 * ```
 */
export function integerAtLeast(value: number, min: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigurationError(
      `${name} must be an integer of at least ${min}; got ${String(value)}`,
    )
  }
  return value
}

/**
 * A function option (a clock, an error reporter). For store authors.
 *
 * @example
 * ```ts
 * const now = functionOption(options.now ?? Date.now, 'now')
 * ```
 */
export function functionOption<T>(value: T, name: string): T {
  if (typeof value !== 'function') {
    throw new ConfigurationError(`${name} must be a function; got ${String(value)}`)
  }
  return value
}

function describeValue(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  if (typeof value === 'object') return `a ${value.constructor?.name ?? 'object'}`
  return `${typeof value} ${String(value)}`
}
