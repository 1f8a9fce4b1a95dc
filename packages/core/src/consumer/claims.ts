import { AceMqError, describeError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import {
  claimWith,
  type ClaimResult,
  type IdempotencyStore,
} from '../idempotency/idempotency-store.js'
import { sleep } from '../internal/timers.js'
import type { ConsumerHost } from './consumer-host.js'

/** How long to wait before each retry of a failed confirm or release. */
const STORE_RETRY_DELAYS_MS = [100, 500, 2_000] as const

/**
 * A consumer's idempotency claims (docs/design.md §7, §13): claim, confirm and release, each
 * bounded by the store timeout, and whether the store is failing (for health). Each claim has
 * its own owner, so a release can only ever free its own delivery's claim.
 */
export class Claims {
  readonly #host: ConsumerHost
  readonly #timeoutMs: number
  #failure: string | undefined

  constructor(host: ConsumerHost, storeTimeoutMs: number) {
    this.#host = host
    this.#timeoutMs = storeTimeoutMs
  }

  /** Why the store is failing, while it keeps failing. */
  get failure(): string | undefined {
    return this.#failure
  }

  /** Asks the store for a claim, bounded by the store timeout. */
  claim(store: IdempotencyStore, id: string, owner: string): Promise<ClaimResult> {
    const claim = claimWith(store, id, owner)
    return withTimeout(claim, this.#timeoutMs, `claiming message ${id}`, () => {
      // A claim that lands after its timeout belongs to nobody: give it back at once.
      claim.then(
        (result) => {
          if (result === 'claimed') this.release(store, id, owner)
        },
        () => undefined,
      )
    })
  }

  /** The store answered a claim: it is not failing (any more). */
  answered(): void {
    this.#failure = undefined
  }

  /**
   * Releases this delivery's claim, in the background. A release that fails is tried again as a
   * confirm is: a claim left behind holds its message in progress (put back again and again)
   * until its lease runs out. If it still fails the claim is left to expire, and the failure
   * reported. The owner check keeps a late release from freeing anyone else's claim.
   */
  release(store: IdempotencyStore, id: string, owner: string | undefined): void {
    void this.#withStoreRetries(
      () => store.release(id, owner),
      `releasing message ${id}`,
      `could not release message ${id}`,
    )
  }

  /**
   * Records the work as done. A confirm that fails is tried again a few times: an id left
   * unconfirmed becomes claimable once its lease runs out, and a second copy of the message (a
   * publisher that resent after a lost confirm) would then run the handler again. If it still
   * fails the message is acked all the same — the work is done — and the failure reported.
   */
  async confirm(store: IdempotencyStore, id: string, owner: string): Promise<void> {
    await this.#withStoreRetries(
      () => store.confirm(id, owner),
      `confirming message ${id}`,
      `could not confirm message ${id}`,
    )
  }

  /** The store failed: health says so until a call succeeds, and the failure is reported. */
  failed(error: unknown, context: string): void {
    this.#failure = describeError(error)
    this.#host.reportError(error, context)
  }

  /**
   * Runs a store call, each try bounded by the store timeout, tried again after each of
   * {@link STORE_RETRY_DELAYS_MS} (not once the connection is closing); the last failure is
   * reported (`failed`) and the store marked failing. A success clears that mark.
   */
  async #withStoreRetries(
    call: () => Promise<unknown>,
    doing: string,
    failed: string,
  ): Promise<void> {
    let last: unknown
    for (let attempt = 0; attempt <= STORE_RETRY_DELAYS_MS.length; attempt++) {
      if (attempt > 0) {
        const wait = STORE_RETRY_DELAYS_MS[attempt - 1] as number
        if (!(await sleep(wait, this.#host.closingSignal))) break
      }
      try {
        await withTimeout(call(), this.#timeoutMs, doing)
        this.#failure = undefined
        return
      } catch (error) {
        last = error
      }
    }
    this.failed(last, failed)
  }
}

/**
 * Rejects with an `ACEMQ_STORE_TIMEOUT` error when `promise` has not settled within `ms`
 * (`onTimeout` then runs); otherwise settles as `promise` does.
 */
function withTimeout<R>(
  promise: Promise<R>,
  ms: number,
  what: string,
  onTimeout?: () => void,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.()
      reject(
        new AceMqError(`the idempotency store did not answer within ${ms} ms (${what})`, {
          code: ErrorCodes.STORE_TIMEOUT,
        }),
      )
    }, ms)
    timer.unref?.()
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
