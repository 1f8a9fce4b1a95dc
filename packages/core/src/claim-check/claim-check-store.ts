import { ConfigurationError } from '../errors.js'

/**
 * Where a {@link claimCheckCodec} keeps the bodies it moves out of messages (docs/design.md §26).
 * Keys are made by the codec (a UUID); a store keeps each body until `expiresAt` and removes it
 * only in {@link ClaimCheckStore.purgeExpired} or {@link ClaimCheckStore.delete}: never because a
 * message was acked, since a copy of it (a retry, a dead-lettered or replayed copy) may still
 * point at the body. Prove an implementation with `claimCheckStoreConformance()` from
 * `@acemq/testing`.
 *
 * @example
 * ```ts
 * await store.put('0b9f…', body, Date.now() + 30 * 86_400_000)
 * const again = await store.get('0b9f…') // the same bytes, or undefined once purged
 * ```
 */
export interface ClaimCheckStore {
  /** Stores `body` under `key` until `expiresAt` (epoch ms); a second put of a key replaces it. */
  put(key: string, body: Uint8Array, expiresAt: number): Promise<void>
  /** The body under `key`, or `undefined` when there is none (never stored, deleted or purged). */
  get(key: string): Promise<Uint8Array | undefined>
  /** Removes the body under `key`; removing a key that is not there is not an error. */
  delete(key: string): Promise<void>
  /** Removes every body whose `expiresAt` is at or before `now` (default: the clock); answers how many. */
  purgeExpired(now?: number): Promise<number>
}

const KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/

/**
 * Throws a {@link ConfigurationError} unless `key` is a claim-check key a store can hold: 1 to
 * 200 letters, digits, `.`, `_` or `-`, not starting with a dot (so a file store can use it
 * as a file name, and `../` can never name another file).
 */
export function assertClaimCheckKey(key: unknown, name: string): asserts key is string {
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new ConfigurationError(
      `${name} must be a claim-check key of 1 to 200 letters, digits, '.', '_' or '-' (not starting with '.'); got ${JSON.stringify(key)}`,
    )
  }
}

/** Throws a {@link ConfigurationError} unless `expiresAt` is a finite epoch-ms time. */
export function assertExpiresAt(expiresAt: unknown, name: string): asserts expiresAt is number {
  if (typeof expiresAt !== 'number' || !Number.isFinite(expiresAt)) {
    throw new ConfigurationError(
      `${name} must be a time in epoch milliseconds; got ${String(expiresAt)}`,
    )
  }
}
