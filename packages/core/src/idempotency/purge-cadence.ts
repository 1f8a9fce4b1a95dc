import { integerAtLeast } from './store-validation.js'

/** The table an SQL idempotency store uses unless told otherwise. */
export const DEFAULT_IDEMPOTENCY_TABLE = 'acemq_idempotency'

/** An SQL store purges expired rows on every this-many-th claim (100). */
export const DEFAULT_PURGE_EVERY = 100

/** One purge deletes at most this many expired rows (1000), so it never holds locks long. */
export const DEFAULT_PURGE_BATCH_SIZE = 1_000

/**
 * When a store purges expired rows: on every `purgeEvery`-th claim (never with 0, for a
 * scheduled purge instead), at most `purgeBatchSize` rows at a time. The options are checked
 * here, so every store refuses the same values with the same message. For store authors.
 *
 * @example
 * ```ts
 * const cadence = new PurgeCadence(options) // in the constructor
 * if (cadence.claimed()) this.#purge() // in tryClaim
 * ```
 */
export class PurgeCadence {
  /** Claims between two purges; 0 never purges. */
  readonly every: number
  /** The most rows one purge deletes. */
  readonly batchSize: number
  #claims = 0

  /**
   * Checks `purgeEvery` (an integer of at least 0) and `purgeBatchSize` (at least 1),
   * defaulting to {@link DEFAULT_PURGE_EVERY} and {@link DEFAULT_PURGE_BATCH_SIZE}.
   *
   * @example
   * ```ts
   * new PurgeCadence({ purgeEvery: 0 }) // purges only when the application calls purgeExpired()
   * ```
   */
  constructor(options: { readonly purgeEvery?: number; readonly purgeBatchSize?: number } = {}) {
    this.every = integerAtLeast(options.purgeEvery ?? DEFAULT_PURGE_EVERY, 0, 'purgeEvery')
    this.batchSize = integerAtLeast(
      options.purgeBatchSize ?? DEFAULT_PURGE_BATCH_SIZE,
      1,
      'purgeBatchSize',
    )
  }

  /**
   * Counts a claim: true when this one is due to purge.
   *
   * @example
   * ```ts
   * if (cadence.claimed()) this.#purge()
   * ```
   */
  claimed(): boolean {
    return this.every !== 0 && ++this.#claims % this.every === 0
  }
}

/**
 * Hands a failed background purge to the store's `onError`; a reporter that throws in turn is
 * ignored, so the purge's failure never fails the claim that triggered it. For store authors.
 *
 * @example
 * ```ts
 * this.#purge().catch((error) => reportPurgeFailure(this.#onError, error))
 * ```
 */
export function reportPurgeFailure(onError: (error: unknown) => void, error: unknown): void {
  try {
    onError(error)
  } catch {
    // The reporter failing is not the caller's problem either.
  }
}
