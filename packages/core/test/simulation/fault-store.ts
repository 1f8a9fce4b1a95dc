import { InMemoryIdempotencyStore, type ClaimResult } from '../../src/index.js'
import { type ClaimingIdempotencyStore } from '../../src/spi.js'
import type { VirtualClock } from './virtual-clock.js'

/** The store calls a fault can hit. */
export type StoreOp = 'claim' | 'confirm' | 'release'

/** What a store fault does to the calls it hits. */
export type StoreFaultKind = 'error' | 'hang' | 'late'

/** One claim the store granted, as the simulation's own model of the store sees it. */
export interface ClaimRecord {
  readonly id: string
  readonly owner: string
  /** Virtual ms when the store granted it. */
  readonly grantedAt: number
  /**
   * Where the grant falls among the store's operations: several happen in one virtual
   * millisecond, so only this tells which came first.
   */
  readonly grantedSeq: number
  /** Virtual ms when the engine heard the answer (a late answer comes after the grant). */
  answeredAt: number | undefined
  /** A handler run used it. */
  usedBy: number | undefined
  releasedAt: number | undefined
  /** When a confirm by this owner landed in the store. */
  confirmedAt: number | undefined
  /** Where that confirm falls among the store's operations (see `grantedSeq`). */
  confirmedSeq: number | undefined
  /** A confirm by this owner was asked for (whether or not it landed). */
  confirmAsked: boolean
}

interface PendingFault {
  readonly op: StoreOp | 'any'
  readonly kind: StoreFaultKind
  left: number
  readonly delayMs: number
}

/**
 * Wraps the in-memory store and fails its calls on demand: an error (nothing done), a hang
 * (nothing done, never answers) or a late answer (done at once, answered `delayMs` later). It
 * keeps a model of the claims by owner, and reports a claim granted over another owner's live
 * claim (the store, or a release by the wrong owner, freed it).
 */
export class FaultStore implements ClaimingIdempotencyStore {
  readonly inner: InMemoryIdempotencyStore
  readonly claims: ClaimRecord[] = []
  readonly violations: string[] = []
  readonly #clock: VirtualClock
  readonly #faults: PendingFault[] = []
  readonly #claimTimeoutMs: number
  /** Counts the inner store's operations, in the order it does them. */
  #seq = 0
  /** Ids confirmed, and when (virtual ms). */
  readonly confirmed = new Map<string, number>()
  /** Calls that failed, hung or answered late, by id. */
  readonly troubled = new Map<string, StoreOp[]>()

  constructor(clock: VirtualClock, claimTimeoutMs: number) {
    this.#clock = clock
    this.#claimTimeoutMs = claimTimeoutMs
    this.inner = new InMemoryIdempotencyStore({ claimTimeout: claimTimeoutMs, retention: '7d' })
  }

  /** The next `count` calls of `op` fail as `kind` says. */
  inject(op: StoreOp | 'any', kind: StoreFaultKind, count: number, delayMs = 0): void {
    this.#faults.push({ op, kind, left: count, delayMs })
  }

  /** Ends every fault still pending. */
  heal(): void {
    this.#faults.length = 0
  }

  tryClaim(id: string, owner?: string): Promise<ClaimResult> {
    return this.#call('claim', id, async () => {
      // The in-memory store does its work when called: the number taken here is its order.
      const seq = ++this.#seq
      const result = await this.inner.tryClaim(id, owner)
      if (result === 'claimed') this.#granted(id, owner as string, seq)
      return result
    })
  }

  async claim(id: string, owner?: string): Promise<boolean> {
    return (await this.tryClaim(id, owner)) === 'claimed'
  }

  confirm(id: string, owner?: string): Promise<void> {
    const record = this.#latest(id, owner)
    if (record !== undefined) record.confirmAsked = true
    return this.#call('confirm', id, async () => {
      const seq = ++this.#seq
      await this.inner.confirm(id, owner)
      if (record !== undefined) {
        record.confirmedAt = this.#clock.now
        record.confirmedSeq = seq
      }
      if (!this.confirmed.has(id)) this.confirmed.set(id, this.#clock.now)
    })
  }

  release(id: string, owner?: string): Promise<void> {
    return this.#call('release', id, async () => {
      await this.inner.release(id, owner)
      const record = this.#latest(id, owner)
      if (record !== undefined && record.confirmedAt === undefined)
        record.releasedAt ??= this.#clock.now
    })
  }

  isConfirmed(id: string): Promise<boolean> {
    return this.inner.isConfirmed(id)
  }

  /** The claim `owner` took on `id`. */
  #latest(id: string, owner: string | undefined): ClaimRecord | undefined {
    for (let i = this.claims.length - 1; i >= 0; i--) {
      const claim = this.claims[i] as ClaimRecord
      if (claim.id === id && claim.owner === owner) return claim
    }
    return undefined
  }

  #granted(id: string, owner: string, seq: number): void {
    const now = this.#clock.now
    for (const other of this.claims) {
      if (other.id !== id || other.owner === owner) continue
      if (other.confirmedAt !== undefined || other.releasedAt !== undefined) continue
      // A lease the store could have given away (a clock jump counts: the store reads Date).
      if (now - other.grantedAt > this.#claimTimeoutMs) continue
      this.violations.push(
        `the store granted ${id} to a new owner at ${now} ms while the claim taken at ${other.grantedAt} ms was live, unconfirmed and not released by its owner`,
      )
    }
    this.claims.push({
      id,
      owner,
      grantedAt: now,
      grantedSeq: seq,
      answeredAt: undefined,
      usedBy: undefined,
      releasedAt: undefined,
      confirmedAt: undefined,
      confirmedSeq: undefined,
      confirmAsked: false,
    })
  }

  #call<R>(op: StoreOp, id: string, run: () => Promise<R>): Promise<R> {
    const fault = this.#faults.find((f) => f.left > 0 && (f.op === op || f.op === 'any'))
    if (fault === undefined) return this.#answered(op, id, run())
    fault.left--
    const troubles = this.troubled.get(id) ?? []
    troubles.push(op)
    this.troubled.set(id, troubles)
    switch (fault.kind) {
      case 'error':
        return Promise.reject(new Error(`simulated store error on ${op}`))
      case 'hang':
        return new Promise<R>(() => undefined)
      case 'late': {
        const result = run()
        return new Promise<R>((resolve, reject) => {
          this.#clock.setTimeout(() => {
            this.#answered(op, id, result).then(resolve, reject)
          }, fault.delayMs)
        })
      }
    }
  }

  #answered<R>(op: StoreOp, id: string, result: Promise<R>): Promise<R> {
    if (op !== 'claim') return result
    return result.then((value) => {
      if (value === 'claimed') {
        const record = [...this.claims].reverse().find((c) => c.id === id)
        if (record !== undefined) record.answeredAt ??= this.#clock.now
      }
      return value
    })
  }
}
