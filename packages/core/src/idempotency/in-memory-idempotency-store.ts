import { DEFAULT_CLAIM_TIMEOUT, DEFAULT_IDEMPOTENCY_RETENTION } from '../constants.js'
import type { Duration } from '../duration.js'
import {
  assertIdempotencyKey as assertId,
  assertOwnerToken,
  positiveMillis,
} from './store-validation.js'
import { ConfigurationError } from '../errors.js'
import type { ClaimResult, ClaimingIdempotencyStore } from './idempotency-store.js'

// Every store's default retention, beside the other defaults; still importable from here.
export { DEFAULT_IDEMPOTENCY_RETENTION } from '../constants.js'

/** How many ids the in-memory store remembers before it forgets the oldest (100 000). */
export const DEFAULT_IDEMPOTENCY_MAX_ENTRIES = 100_000

/** How many expired entries one call may purge, so no call pays for a full scan. */
const PURGE_STEP = 32

/**
 * Options of {@link InMemoryIdempotencyStore}.
 *
 * @example
 * ```ts
 * const options: InMemoryIdempotencyStoreOptions = { retention: '6h', claimTimeout: '2m' }
 * ```
 */
export interface InMemoryIdempotencyStoreOptions {
  /** How long a confirmed id stays a duplicate (default 1 day). */
  readonly retention?: Duration
  /** How long an unconfirmed claim lives before another caller may take it over (default {@link DEFAULT_CLAIM_TIMEOUT}, 5 min). */
  readonly claimTimeout?: Duration
  /** How many ids are remembered at most (default 100 000); the oldest are forgotten first. */
  readonly maxEntries?: number
  /** The clock, in epoch milliseconds (default `Date.now`). For tests: it lets a test move time without sleeping. */
  readonly now?: () => number
}

interface Claim {
  /** The caller's owner token, or the symbol of the handle that claimed without one. */
  readonly owner: string | symbol
  readonly claimedAt: number
}

/** What every handle made by {@link InMemoryIdempotencyStore.share} sees. */
interface SharedState {
  /** Unconfirmed claims, in the order they were taken (so the stalest is first). */
  readonly claims: Map<string, Claim>
  /** Confirmed ids and when they were confirmed, oldest first. */
  readonly confirmed: Map<string, number>
}

/**
 * An idempotency store in this process's memory: it deduplicates what one running service
 * sees (most redeliveries), and is lost on restart, so it cannot deduplicate across
 * instances or deploys — use `@acemq/store-kysely` or `@acemq/store-sqlite` for that.
 *
 * A claim is a lease: an unconfirmed claim older than `claimTimeout` is taken over; a
 * confirmed id is a duplicate for `retention` (still one when exactly `retention` old). A
 * claim is held by the `owner` token passed with it, or by this handle when none is passed;
 * `release` frees it only while that owner still holds it, so a late release by an owner
 * whose lease was taken over frees nothing. Memory is bounded by `maxEntries`: stale claims
 * are forgotten first, then the oldest confirmed ids, and a live claim only when nothing
 * else is left.
 *
 * @example
 * ```ts
 * const consumer = await mq.consume('orders.placed',
 *   ConsumerOptions.defaults().idempotent(InMemoryIdempotencyStore.forOneDay()), handle)
 * ```
 */
export class InMemoryIdempotencyStore implements ClaimingIdempotencyStore {
  /** The default claim window, 5 min: the same figure every AceMQ library uses. */
  static readonly DEFAULT_CLAIM_TIMEOUT = DEFAULT_CLAIM_TIMEOUT

  /** How long a confirmed id stays a duplicate, in milliseconds. */
  readonly retention: number
  /** How long an unconfirmed claim lives before it may be taken over, in milliseconds. */
  readonly claimTimeout: number
  /** How many ids are remembered at most. */
  readonly maxEntries: number

  readonly #now: () => number
  #state: SharedState = { claims: new Map(), confirmed: new Map() }
  /** The owner of the claims taken without an owner token: no caller's string can equal it. */
  readonly #token = Symbol('acemq.idempotency.owner')

  /**
   * Creates a store. Every option is checked here: a bad value throws a
   * {@link ConfigurationError} naming the option and the value.
   *
   * @example
   * ```ts
   * const store = new InMemoryIdempotencyStore({ retention: '1d', claimTimeout: '5m', maxEntries: 50_000 })
   * ```
   */
  constructor(options: InMemoryIdempotencyStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(
        `InMemoryIdempotencyStore options must be an object; got ${String(options)}`,
      )
    }
    this.retention = positiveMillis(options.retention ?? DEFAULT_IDEMPOTENCY_RETENTION, 'retention')
    this.claimTimeout = positiveMillis(
      options.claimTimeout ?? DEFAULT_CLAIM_TIMEOUT,
      'claimTimeout',
    )
    const maxEntries = options.maxEntries ?? DEFAULT_IDEMPOTENCY_MAX_ENTRIES
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new ConfigurationError(
        `maxEntries must be a positive integer; got ${String(maxEntries)}`,
      )
    }
    this.maxEntries = maxEntries
    const now = options.now ?? Date.now
    if (typeof now !== 'function') {
      throw new ConfigurationError(
        `now must be a function returning epoch milliseconds; got ${String(now)}`,
      )
    }
    this.#now = now
  }

  /**
   * A store that remembers ids for one day, with the default 5 min claim window.
   *
   * @example
   * ```ts
   * ConsumerOptions.defaults().idempotent(InMemoryIdempotencyStore.forOneDay())
   * ```
   */
  static forOneDay(): InMemoryIdempotencyStore {
    return new InMemoryIdempotencyStore({ retention: '1d' })
  }

  /**
   * Another handle on the same remembered ids whose owner-less claims are its own, as a
   * second process on a shared database would be: its `release()` without an owner never
   * frees a claim this handle took.
   *
   * @example
   * ```ts
   * const a = InMemoryIdempotencyStore.forOneDay(); const b = a.share()
   * await a.tryClaim('m-1') // 'claimed'
   * await b.tryClaim('m-1') // 'in_progress'
   * ```
   */
  share(): InMemoryIdempotencyStore {
    const twin = new InMemoryIdempotencyStore({
      retention: this.retention,
      claimTimeout: this.claimTimeout,
      maxEntries: this.maxEntries,
      now: this.#now,
    })
    twin.#state = this.#state
    return twin
  }

  /**
   * How many ids are remembered now (claims and confirmed ids, including expired ones not
   * purged yet).
   *
   * @example
   * ```ts
   * metrics.gauge('idempotency.entries', store.size)
   * ```
   */
  get size(): number {
    return this.#state.claims.size + this.#state.confirmed.size
  }

  /**
   * Claims `id` for `owner` (default: this handle): `'claimed'` when it is new, expired, or
   * its claim is stale (older than the claim timeout); `'duplicate'` when it was confirmed
   * within the retention; `'in_progress'` when a live claim is held — by anyone, the same
   * owner included, so one owner never runs the same id twice at once.
   *
   * @example
   * ```ts
   * if ((await store.tryClaim(message.envelope.id, randomUUID())) === 'claimed') await handle(message)
   * ```
   */
  async tryClaim(id: string, owner?: string): Promise<ClaimResult> {
    assertId(id)
    assertOwnerToken(owner)
    const now = this.#now()
    this.#purge(now)
    const { claims, confirmed } = this.#state
    const confirmedAt = confirmed.get(id)
    if (confirmedAt !== undefined) {
      if (now - confirmedAt <= this.retention) return 'duplicate'
      confirmed.delete(id)
    }
    const claim = claims.get(id)
    if (claim !== undefined) {
      if (now - claim.claimedAt <= this.claimTimeout) return 'in_progress'
      // Taken over: deleting first moves it to the end of the insertion order.
      claims.delete(id)
    }
    claims.set(id, { owner: owner ?? this.#token, claimedAt: now })
    this.#evict(now)
    return 'claimed'
  }

  /**
   * Claims `id`; true when this caller holds the claim now.
   *
   * @example
   * ```ts
   * if (await store.claim(id)) { ... }
   * ```
   */
  async claim(id: string, owner?: string): Promise<boolean> {
    return (await this.tryClaim(id, owner)) === 'claimed'
  }

  /**
   * Marks `id` handled: it is a duplicate for the retention from now on. The id is recorded
   * whoever holds the claim — even when `owner`'s claim was taken over meanwhile — because
   * the work did happen and must not be done a third time; the new owner's release then
   * frees nothing.
   *
   * @example
   * ```ts
   * await handle(message); await store.confirm(message.envelope.id, owner)
   * ```
   */
  async confirm(id: string, owner?: string): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    const now = this.#now()
    const { claims, confirmed } = this.#state
    claims.delete(id)
    confirmed.delete(id)
    confirmed.set(id, now)
    this.#evict(now)
  }

  /**
   * Gives up `owner`'s claim on `id` (default: this handle's) so a retry can take it. Does
   * nothing when `owner` does not hold it (taken over after its lease ran out, or never
   * taken) or the id was confirmed.
   *
   * @example
   * ```ts
   * try { await handle(message) } catch (e) { await store.release(message.envelope.id, owner); throw e }
   * ```
   */
  async release(id: string, owner?: string): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    const { claims } = this.#state
    if (claims.get(id)?.owner === (owner ?? this.#token)) claims.delete(id)
  }

  /**
   * Whether `id` was confirmed within the retention.
   *
   * @example
   * ```ts
   * if (await store.isConfirmed(id)) console.log('already handled')
   * ```
   */
  async isConfirmed(id: string): Promise<boolean> {
    assertId(id)
    const confirmedAt = this.#state.confirmed.get(id)
    return confirmedAt !== undefined && this.#now() - confirmedAt <= this.retention
  }

  /** Forgets a few expired entries from the front of each map: each entry is purged once, so the cost is constant per call. */
  #purge(now: number): void {
    const { claims, confirmed } = this.#state
    let budget = PURGE_STEP
    for (const [id, claim] of claims) {
      if (budget-- <= 0 || now - claim.claimedAt <= this.claimTimeout) break
      claims.delete(id)
    }
    for (const [id, confirmedAt] of confirmed) {
      if (budget-- <= 0 || now - confirmedAt <= this.retention) break
      confirmed.delete(id)
    }
  }

  /** Keeps memory bounded: stale claims go first, then the oldest confirmed ids, a live claim last. */
  #evict(now: number): void {
    const { claims, confirmed } = this.#state
    while (claims.size + confirmed.size > this.maxEntries) {
      const oldestClaim = first(claims)
      if (oldestClaim !== undefined && now - oldestClaim[1].claimedAt > this.claimTimeout) {
        claims.delete(oldestClaim[0])
        continue
      }
      const oldestConfirmed = first(confirmed)
      if (oldestConfirmed !== undefined) {
        confirmed.delete(oldestConfirmed[0])
        continue
      }
      if (oldestClaim === undefined) return
      claims.delete(oldestClaim[0])
    }
  }
}

function first<K, V>(map: Map<K, V>): [K, V] | undefined {
  const next = map.entries().next()
  return next.done === true ? undefined : next.value
}
