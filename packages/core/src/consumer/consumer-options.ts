import {
  DEFAULT_CONCURRENCY,
  DEFAULT_HELD_TIMEOUT,
  DEFAULT_IN_PROGRESS_DELAY,
  DEFAULT_PREFETCH,
  DEFAULT_RETRY_DELAY,
  DEFAULT_STORE_TIMEOUT,
} from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import { ConfigurationError } from '../errors.js'
import type { IdempotencyStore } from '../idempotency/idempotency-store.js'
import type { RetryPolicy } from '../retry/retry-policy.js'
import type { OnDeadLetter } from './dead-letter.js'
import { assertInterceptor, type ConsumeInterceptor } from './interceptor.js'

/** The options' fields, named once: in the class declaration below. */
type Fields = {
  readonly [
    K in keyof ConsumerOptions as ConsumerOptions[K] extends (...args: never[]) => unknown
      ? never
      : K
  ]: ConsumerOptions[K]
}

function positiveInteger(value: number, name: string, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new ConfigurationError(
      `${name} must be a whole number from 1 to ${max}; got ${String(value)}`,
    )
  }
  return value
}

/**
 * How a consumer behaves: retry policy, idempotency, prefetch and concurrency. Immutable:
 * every `withX()` returns a new, frozen value.
 *
 * @example
 * ```ts
 * const options = ConsumerOptions.defaults()
 *   .withRetry(RetryPolicy.exponential(5, '1s', '1m'))
 *   .idempotent(InMemoryIdempotencyStore.forOneDay())
 *   .withPrefetch(20)
 * ```
 */
export class ConsumerOptions {
  /** The retry policy, or undefined: a failure is then retried after `retryDelayMs`, forever. */
  declare readonly retryPolicy: RetryPolicy | undefined
  /** The idempotency store the consumer claims message ids in, if any. */
  declare readonly store: IdempotencyStore | undefined
  /** Unacknowledged deliveries the consumer may hold (default 20), per consumer. */
  declare readonly prefetch: number
  /** Handlers run at once (default 1, which keeps order). */
  declare readonly concurrency: number
  /** Wait before a retry when there is no policy (default 5 s); `Ack.retry(reason, delay)` overrides it. */
  declare readonly retryDelayMs: number
  /** Wait before putting back a message someone else is handling (default 5 s). */
  declare readonly inProgressDelayMs: number
  /** How long a paused consumer holds delivered messages before handing them back (default 60 s). */
  declare readonly heldTimeoutMs: number
  /** How long one idempotency-store call may take before it counts as failed (default 10 s). */
  declare readonly storeTimeoutMs: number
  /** This consumer's own interceptors, run with the connection's by `order` (default none). */
  declare readonly interceptors: readonly ConsumeInterceptor[]
  /** Told of each message this consumer moves to `.dlq` or `.parked` (default: the connection's `onDeadLetter`). */
  declare readonly onDeadLetter: OnDeadLetter | undefined

  readonly #fields: Fields

  private constructor(fields: Fields) {
    this.#fields = fields
    Object.assign(this, fields)
    Object.freeze(this)
  }

  /** No retry policy, no idempotency, prefetch 20, concurrency 1. */
  static defaults(): ConsumerOptions {
    return new ConsumerOptions({
      retryPolicy: undefined,
      store: undefined,
      prefetch: DEFAULT_PREFETCH,
      concurrency: DEFAULT_CONCURRENCY,
      retryDelayMs: DEFAULT_RETRY_DELAY,
      inProgressDelayMs: DEFAULT_IN_PROGRESS_DELAY,
      heldTimeoutMs: DEFAULT_HELD_TIMEOUT,
      storeTimeoutMs: DEFAULT_STORE_TIMEOUT,
      interceptors: NO_INTERCEPTORS,
      onDeadLetter: undefined,
    })
  }

  /** These options with `changes`: every `withX()` is one call of this. */
  #with(changes: Partial<Fields>): ConsumerOptions {
    return new ConsumerOptions({ ...this.#fields, ...changes })
  }

  /** Bounds retries with `policy`; it overrides any delay a handler asks for. */
  withRetry(policy: RetryPolicy): ConsumerOptions {
    if (typeof policy !== 'object' || policy === null || typeof policy.nextWait !== 'function') {
      throw new ConfigurationError(
        `withRetry(policy): policy must be a RetryPolicy; got ${String(policy)}`,
      )
    }
    return this.#with({ retryPolicy: policy })
  }

  /** Handles each message id once, claiming it in `store` before the handler runs. */
  idempotent(store: IdempotencyStore): ConsumerOptions {
    const methods = ['claim', 'confirm', 'release', 'isConfirmed'] as const
    if (
      typeof store !== 'object' ||
      store === null ||
      methods.some((m) => typeof store[m] !== 'function')
    ) {
      throw new ConfigurationError(
        `idempotent(store): store must implement claim, confirm, release and isConfirmed; got ${String(store)}`,
      )
    }
    return this.#with({ store })
  }

  /** Unacknowledged deliveries this consumer may hold (1 to 65535). */
  withPrefetch(prefetch: number): ConsumerOptions {
    return this.#with({ prefetch: positiveInteger(prefetch, 'withPrefetch(prefetch)', 65_535) })
  }

  /** Handlers run at once (1 to 1000); more than 1 gives up ordering. */
  withConcurrency(concurrency: number): ConsumerOptions {
    return this.#with({
      concurrency: positiveInteger(concurrency, 'withConcurrency(concurrency)', 1_000),
    })
  }

  /** The wait before a retry when there is no retry policy. */
  withRetryDelay(delay: Duration): ConsumerOptions {
    return this.#with({ retryDelayMs: toMillis(delay, 'withRetryDelay(delay)') })
  }

  /** The wait before an in-progress message is put back; keep it well under the claim timeout. */
  withInProgressDelay(delay: Duration): ConsumerOptions {
    return this.#with({ inProgressDelayMs: toMillis(delay, 'withInProgressDelay(delay)') })
  }

  /**
   * How long a paused consumer holds the deliveries at its gate (1 ms to 1 day). Past it, it
   * hands them back and cancels its subscription until consuming resumes, so a pause longer
   * than the broker's `consumer_timeout` can never get the channel closed. Keep it well under
   * that timeout.
   */
  withHeldTimeout(timeout: Duration): ConsumerOptions {
    return this.#with({
      heldTimeoutMs: boundedMillis(timeout, 'withHeldTimeout(timeout)', MAX_BOUNDED_TIMEOUT_MS),
    })
  }

  /**
   * How long one idempotency-store call (claim, confirm, release) may take (1 ms to 1 day). A
   * call that takes longer counts as a store failure: a claim is put back and asked again
   * later, a confirm is retried, and health turns DEGRADED while the store keeps failing.
   */
  withStoreTimeout(timeout: Duration): ConsumerOptions {
    return this.#with({
      storeTimeoutMs: boundedMillis(timeout, 'withStoreTimeout(timeout)', MAX_BOUNDED_TIMEOUT_MS),
    })
  }

  /**
   * Adds interceptors to this consumer's own (see {@link ConsumeInterceptor}); they run with the
   * connection's (`mq.intercept`) in ascending `order`, the connection's first among equals.
   *
   * @example
   * ```ts
   * ConsumerOptions.defaults().withInterceptors({ beforeHandle: (m) => audit(m) })
   * ```
   */
  withInterceptors(...interceptors: ConsumeInterceptor[]): ConsumerOptions {
    interceptors.forEach((interceptor, i) =>
      assertInterceptor(interceptor, `withInterceptors(interceptors[${i}])`),
    )
    return this.#with({ interceptors: Object.freeze([...this.interceptors, ...interceptors]) })
  }

  /**
   * Tells `onDeadLetter` of each message this consumer moves to `{queue}.dlq` or
   * `{queue}.parked`, instead of the connection's `onDeadLetter`.
   *
   * @example
   * ```ts
   * ConsumerOptions.defaults().withOnDeadLetter((r) => alerts.page(`${r.target}: ${r.reason}`))
   * ```
   */
  withOnDeadLetter(onDeadLetter: OnDeadLetter): ConsumerOptions {
    if (typeof onDeadLetter !== 'function') {
      throw new ConfigurationError(
        `withOnDeadLetter(onDeadLetter) must be a function; got ${String(onDeadLetter)}`,
      )
    }
    return this.#with({ onDeadLetter })
  }
}

const NO_INTERCEPTORS: readonly ConsumeInterceptor[] = Object.freeze([])

/** One day: the longest held or store timeout (setTimeout holds at most 2^31−1 ms). */
const MAX_BOUNDED_TIMEOUT_MS = 86_400_000

function boundedMillis(value: Duration, name: string, max: number): number {
  const ms = toMillis(value, name)
  if (ms < 1 || ms > max) {
    throw new ConfigurationError(
      `${name} must be from 1 ms to ${max} ms (1 day); got ${JSON.stringify(value)}`,
    )
  }
  return ms
}
