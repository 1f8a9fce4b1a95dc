import { randomUUID } from 'node:crypto'
import { ConfigurationError } from '../errors.js'
import { OutboxRecord } from './outbox-record.js'
import {
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  assertClaimBatch,
  assertRenew,
  outboxFailOptions,
  outboxIds,
  outboxLease,
  outboxReason,
  type OutboxFailOptions,
  type OutboxFailure,
  type OutboxStats,
  type OutboxStore,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from './outbox-store.js'

/**
 * Options of {@link InMemoryOutboxStore}.
 *
 * @example
 * ```ts
 * new InMemoryOutboxStore({ maxAttempts: 3 })
 * ```
 */
export interface InMemoryOutboxStoreOptions {
  /** Failed publishes before a record is retired (default 10). */
  readonly maxAttempts?: number
  /** The clock, epoch milliseconds (default `Date.now`); tests move it instead of sleeping. */
  readonly now?: () => number
}

interface Entry {
  record: StoredOutboxRecord
  leaseOwner: string | undefined
  leasedUntil: number
  publishedAt: number | undefined
  retiredAt: number | undefined
}

/**
 * An outbox in this process's memory: for tests, demos and the in-memory transport. There is
 * no transaction to share, so `add` writes at once; nothing survives the process.
 *
 * @example
 * ```ts
 * const outbox = new InMemoryOutboxStore()
 * await outbox.add(OutboxRecord.of('', 'orders.placed', order))
 * await mq.outbox(outbox).drainOnce()
 * ```
 */
export class InMemoryOutboxStore implements OutboxStore {
  /** Failed publishes before a record is retired. */
  readonly maxAttempts: number
  readonly #now: () => number
  readonly #entries = new Map<string, Entry>()

  constructor(options: InMemoryOutboxStoreOptions = {}) {
    const maxAttempts = options.maxAttempts ?? DEFAULT_OUTBOX_MAX_ATTEMPTS
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1) {
      throw new ConfigurationError(
        `maxAttempts must be a whole number of at least 1; got ${String(maxAttempts)}`,
      )
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ConfigurationError(`now must be a function; got ${String(options.now)}`)
    }
    this.maxAttempts = maxAttempts
    this.#now = options.now ?? Date.now
  }

  /**
   * Adds a record; a record whose id is already in the outbox is refused.
   *
   * @example
   * ```ts
   * await outbox.add(OutboxRecord.of('orders', 'order.placed', order))
   * ```
   */
  async add(record: OutboxRecord): Promise<void> {
    if (!(record instanceof OutboxRecord)) {
      throw new ConfigurationError('add(record) needs an OutboxRecord, from OutboxRecord.of()')
    }
    if (this.#entries.has(record.id)) {
      throw new ConfigurationError(`add(record): the outbox already has a record '${record.id}'`)
    }
    this.#entries.set(record.id, {
      record: Object.freeze({
        id: record.id,
        exchange: record.exchange,
        routingKey: record.routingKey,
        body: record.body,
        contentType: record.contentType,
        headers: record.headers,
        envelope: record.envelope,
        createdAt: this.#now(),
        attempts: 0,
        lastError: undefined,
      }),
      leaseOwner: undefined,
      leasedUntil: 0,
      publishedAt: undefined,
      retiredAt: undefined,
    })
  }

  async claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]> {
    assertClaimBatch(batch, leaseMs)
    const now = this.#now()
    const owner = randomUUID()
    const claimed: StoredOutboxRecord[] = []
    // Insertion order is creation order.
    for (const entry of this.#entries.values()) {
      if (claimed.length >= batch) break
      if (entry.publishedAt !== undefined || entry.retiredAt !== undefined) continue
      if (entry.leasedUntil > now) continue
      entry.leaseOwner = owner
      entry.leasedUntil = now + leaseMs
      claimed.push(Object.freeze({ ...entry.record, lease: owner }))
    }
    return claimed
  }

  async renew(ids: string | readonly string[], lease: string, leaseMs: number): Promise<number> {
    const list = assertRenew(ids, lease, leaseMs)
    const until = this.#now() + leaseMs
    let renewed = 0
    for (const id of list) {
      const entry = this.#entries.get(id)
      if (entry === undefined || !this.#pending(entry) || entry.leaseOwner !== lease) continue
      entry.leasedUntil = until
      renewed++
    }
    return renewed
  }

  async markPublished(ids: string | readonly string[]): Promise<void> {
    const now = this.#now()
    for (const id of outboxIds(ids)) {
      const entry = this.#entries.get(id)
      if (entry === undefined || entry.publishedAt !== undefined) continue
      entry.publishedAt = now
      entry.leaseOwner = undefined
      entry.leasedUntil = 0
    }
  }

  async markFailed(
    id: string,
    reason: string,
    options?: number | OutboxFailOptions,
  ): Promise<OutboxFailure> {
    const { maxAttempts, lease, retryInMs } = outboxFailOptions(options, this.maxAttempts)
    const [key] = outboxIds(id)
    const entry = this.#entries.get(key as string)
    if (entry === undefined) {
      throw new ConfigurationError(`markFailed(id): the outbox has no record '${String(id)}'`)
    }
    if (!this.#pending(entry))
      return lease === undefined && entry.retiredAt !== undefined ? 'retired' : 'lapsed'
    if (lease !== undefined && entry.leaseOwner !== lease) return 'lapsed'
    const attempts = entry.record.attempts + 1
    entry.record = Object.freeze({ ...entry.record, attempts, lastError: outboxReason(reason) })
    entry.leaseOwner = undefined
    entry.leasedUntil = retryInMs === 0 ? 0 : this.#now() + retryInMs
    if (attempts >= maxAttempts) {
      entry.retiredAt = this.#now()
      return 'retired'
    }
    return 'pending'
  }

  async release(ids: string | readonly string[], lease?: string | undefined): Promise<void> {
    const list = outboxIds(ids)
    if (lease !== undefined) outboxLease(lease, 'release(lease)')
    for (const id of list) {
      const entry = this.#entries.get(id)
      if (entry === undefined || !this.#pending(entry)) continue
      if (lease !== undefined && entry.leaseOwner !== lease) continue
      entry.leaseOwner = undefined
      entry.leasedUntil = 0
    }
  }

  async reoffer(ids?: string | readonly string[]): Promise<number> {
    const only = ids === undefined ? undefined : new Set(outboxIds(ids))
    let reoffered = 0
    for (const entry of this.#entries.values()) {
      if (entry.retiredAt === undefined || entry.publishedAt !== undefined) continue
      if (only !== undefined && !only.has(entry.record.id)) continue
      entry.retiredAt = undefined
      entry.leaseOwner = undefined
      entry.leasedUntil = 0
      entry.record = Object.freeze({ ...entry.record, attempts: 0 })
      reoffered++
    }
    return reoffered
  }

  #pending(entry: Entry): boolean {
    return entry.publishedAt === undefined && entry.retiredAt === undefined
  }

  async pendingCount(): Promise<number> {
    return (await this.stats()).pending
  }

  async retired(limit = 100): Promise<readonly RetiredOutboxRecord[]> {
    const retired: RetiredOutboxRecord[] = []
    for (const entry of this.#entries.values()) {
      if (retired.length >= limit) break
      if (entry.retiredAt !== undefined)
        retired.push(Object.freeze({ ...entry.record, retiredAt: entry.retiredAt }))
    }
    return retired
  }

  async stats(): Promise<OutboxStats> {
    let pending = 0
    let retired = 0
    let oldestPendingAt: number | undefined
    for (const entry of this.#entries.values()) {
      if (entry.retiredAt !== undefined) retired++
      else if (entry.publishedAt === undefined) {
        pending++
        if (oldestPendingAt === undefined || entry.record.createdAt < oldestPendingAt)
          oldestPendingAt = entry.record.createdAt
      }
    }
    return { pending, retired, oldestPendingAt, now: this.#now() }
  }

  /** Whether the record was published (for tests and demos). */
  isPublished(id: string): boolean {
    return this.#entries.get(id)?.publishedAt !== undefined
  }
}
