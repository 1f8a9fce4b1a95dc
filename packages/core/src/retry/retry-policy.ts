import { DEFAULT_BROKER_WAIT_THRESHOLD } from '../constants.js'
import { formatDuration, toMillis, type Duration } from '../duration.js'
import { ConfigurationError } from '../errors.js'
import { MAX_BROKER_WAIT } from './queue-names.js'

/**
 * How long to wait before the next attempt, and where: `inBroker` waits sit on a rung queue
 * (`{queue}.retry.{delay}`) and are exact; consumer waits hold the delivery and are jittered.
 *
 * @example
 * ```ts
 * const wait = policy.nextWait(envelope.attempt, ageMs) // { delayMs: 40_000, inBroker: true }
 * ```
 */
export interface RetryWait {
  readonly delayMs: number
  readonly inBroker: boolean
}

type Kind = 'none' | 'fixed' | 'exponential'

/** The policy's public fields, named once: in the class declaration below. */
type Fields = {
  readonly [
    K in keyof RetryPolicy as RetryPolicy[K] extends (...args: never[]) => unknown ? never : K
  ]: RetryPolicy[K]
}

// Attempts travel in `x-acemq-attempt`, a signed 32-bit int: a larger limit could never be reached.
const MAX_ATTEMPTS = 2_147_483_647

const DAY_MS = 86_400_000

const DEFAULT_JITTER: Readonly<Record<Kind, number>> = { none: 0, fixed: 0, exponential: 0.2 }

function checkAttempts(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_ATTEMPTS) {
    throw new ConfigurationError(
      `${name} must be a whole number from 1 to ${MAX_ATTEMPTS}; got ${String(value)}`,
    )
  }
  return value
}

function checkAttempt(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new ConfigurationError(
      `attempt must be a whole number of at least 1 (the first delivery is attempt 1); got ${String(value)}`,
    )
  }
  return value
}

function checkAge(value: unknown): number {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new ConfigurationError(`ageMs must be a number of milliseconds; got ${String(value)}`)
  }
  // A first-seen in the future (clock skew between hosts) is a message of age 0, not an error.
  return value > 0 ? value : 0
}

/**
 * When and how often a failed message is tried again, and when to give up. Immutable: every
 * modifier returns a new, frozen policy. Attempts count every delivery, the first included.
 *
 * | factory | attempts | first delay | multiplier | cap | jitter |
 * |---|---|---|---|---|---|
 * | `none()` | 1 | – | – | – | 0 |
 * | `fixed(n, d)` | n | d | 1 | – | 0 |
 * | `exponential(n, d, cap?)` | n | d | 2 | cap | 0.2 |
 *
 * There is no age limit unless {@link RetryPolicy.giveUpAfter} sets one.
 *
 * A broker wait sits on a rung queue whose TTL is the wait, and RabbitMQ refuses a TTL over
 * {@link MAX_BROKER_WAIT} (ten years): a factory or modifier that would make such a policy
 * (`exponential(60, '30s')` has no cap, so its 25th wait is 16 years) throws a
 * {@link ConfigurationError} naming the attempt and the wait, and nothing is ever declared.
 *
 * @example
 * ```ts
 * const policy = RetryPolicy.exponential(5, '1s', '1m').giveUpAfter('6h')
 * policy.schedule() // [1000, 2000, 4000, 8000]
 * ```
 */
export class RetryPolicy {
  /** Deliveries in all, the first included; at least 1. */
  declare readonly maxAttempts: number
  /** The delay after the first attempt. */
  declare readonly initialDelayMs: number
  /** Each delay is the previous one times this (1 for fixed, 2 for exponential). */
  declare readonly multiplier: number
  /** No delay exceeds this; `undefined` for no cap. */
  declare readonly maxDelayMs: number | undefined
  /** Consumer waits are spread by ± this fraction; broker waits never are. */
  declare readonly jitter: number
  /** Give up on a message at least this old; 0 for never. */
  declare readonly maxAgeMs: number
  /** Waits at or above this are spent in the broker; 0 for never. */
  declare readonly brokerWaitThresholdMs: number
  readonly #kind: Kind
  readonly #fields: Fields

  private constructor(kind: Kind, fields: Fields) {
    this.#kind = kind
    this.#fields = fields
    Object.assign(this, fields)
    Object.freeze(this)
    this.#checkBrokerWaits()
  }

  /** This policy with `changes`: every modifier is one call of this. */
  #with(changes: Partial<Fields>): RetryPolicy {
    return new RetryPolicy(this.#kind, { ...this.#fields, ...changes })
  }

  // A rung queue's TTL is its wait, and RabbitMQ refuses a TTL over MAX_BROKER_WAIT: refused
  // here, when the policy is built, rather than part way through declaring its rungs.
  #checkBrokerWaits(): void {
    const over = this.#firstBrokerWaitOver(MAX_BROKER_WAIT)
    if (over === undefined) return
    const { attempt, delay } = over
    const rendered = formatDuration(delay)
    const shown = rendered === `${delay}ms` ? '' : ` (${rendered})`
    throw new ConfigurationError(
      `RetryPolicy ${String(this)}: the wait after attempt ${attempt} is ${delay} ms${shown}, which would sit on the rung queue '{queue}.retry.${rendered}', but RabbitMQ refuses a message TTL over ${MAX_BROKER_WAIT} ms (ten years); ${this.#remedy()}`,
    )
  }

  #remedy(): string {
    if (this.#kind !== 'exponential') return 'use a shorter delay'
    if (this.initialDelayMs > MAX_BROKER_WAIT) return 'use a shorter initial delay'
    if (this.maxDelayMs !== undefined) return 'give a cap of at most that'
    const example =
      this.initialDelayMs <= DAY_MS
        ? `, such as exponential(${this.maxAttempts}, ${formatDuration(this.initialDelayMs)}, 1d)`
        : ''
    return `give a cap of at most that${example}, or fewer attempts`
  }

  /** The first scheduled broker wait longer than `limitMs`, and the attempt it follows. */
  #firstBrokerWaitOver(limitMs: number): { attempt: number; delay: number } | undefined {
    let previous: number | undefined
    // As in brokerRungs: the schedule never decreases and is flat for good once two neighbours
    // are equal, so this walks at most a few dozen attempts.
    for (let attempt = 1; attempt < this.maxAttempts; attempt++) {
      const delay = this.#delayAfter(attempt)
      if (delay === previous) break
      previous = delay
      if (delay > limitMs && this.waitsInBroker(delay)) return { attempt, delay }
    }
    return undefined
  }

  /**
   * One attempt and no retry: a failure goes straight to `{queue}.dlq`.
   *
   * @example
   * ```ts
   * ConsumerOptions.defaults().withRetry(RetryPolicy.none())
   * ```
   */
  static none(): RetryPolicy {
    return new RetryPolicy('none', {
      maxAttempts: 1,
      initialDelayMs: 0,
      multiplier: 1,
      maxDelayMs: undefined,
      jitter: DEFAULT_JITTER.none,
      maxAgeMs: 0,
      brokerWaitThresholdMs: DEFAULT_BROKER_WAIT_THRESHOLD,
    })
  }

  /**
   * `maxAttempts` attempts with the same `delay` between them, without jitter.
   *
   * @example
   * ```ts
   * RetryPolicy.fixed(4, '30s').schedule() // [30000, 30000, 30000]
   * ```
   */
  static fixed(maxAttempts: number, delay: Duration): RetryPolicy {
    return new RetryPolicy('fixed', {
      maxAttempts: checkAttempts(maxAttempts, 'maxAttempts'),
      initialDelayMs: toMillis(delay, 'delay'),
      multiplier: 1,
      maxDelayMs: undefined,
      jitter: DEFAULT_JITTER.fixed,
      maxAgeMs: 0,
      brokerWaitThresholdMs: DEFAULT_BROKER_WAIT_THRESHOLD,
    })
  }

  /**
   * `maxAttempts` attempts, the delay doubling from `initialDelay` up to `maxDelay` (no cap
   * when omitted), with ±20% jitter on consumer waits. Without a cap, many attempts double
   * past what a rung queue can hold ({@link MAX_BROKER_WAIT}), and the policy is refused.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(6, '10s', '1m').schedule() // [10000, 20000, 40000, 60000, 60000]
   * ```
   */
  static exponential(
    maxAttempts: number,
    initialDelay: Duration,
    maxDelay?: Duration,
  ): RetryPolicy {
    const attempts = checkAttempts(maxAttempts, 'maxAttempts')
    const initialDelayMs = toMillis(initialDelay, 'initialDelay')
    const maxDelayMs = maxDelay === undefined ? undefined : toMillis(maxDelay, 'maxDelay')
    if (maxDelayMs !== undefined && maxDelayMs < initialDelayMs) {
      throw new ConfigurationError(
        `maxDelay (${formatDuration(maxDelayMs)}) must be at least initialDelay (${formatDuration(initialDelayMs)})`,
      )
    }
    return new RetryPolicy('exponential', {
      maxAttempts: attempts,
      initialDelayMs,
      multiplier: 2,
      maxDelayMs,
      jitter: DEFAULT_JITTER.exponential,
      maxAgeMs: 0,
      brokerWaitThresholdMs: DEFAULT_BROKER_WAIT_THRESHOLD,
    })
  }

  /**
   * Gives up on a message once it is `age` old (measured from its first publish), however
   * many attempts are left; a message exactly `age` old is given up on. `0` means never,
   * which is also the default.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(10, '1s', '1m').giveUpAfter('6h')
   * ```
   */
  giveUpAfter(age: Duration): RetryPolicy {
    return this.#with({ maxAgeMs: toMillis(age, 'age') })
  }

  /**
   * Spreads each consumer wait by ±`factor` (0 to 1), both ways, so consumers that failed
   * together do not retry together. Broker waits are never jittered.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(5, '1s').withJitter(0) // reproducible timings for a test
   * ```
   */
  withJitter(factor: number): RetryPolicy {
    if (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 0 || factor > 1) {
      throw new ConfigurationError(
        `factor must be a number from 0 to 1 (0.2 spreads waits by ±20%); got ${String(factor)}`,
      )
    }
    return this.#with({ jitter: factor })
  }

  /**
   * Spends waits of `threshold` or longer in a broker rung queue instead of holding the
   * delivery in the consumer (default {@link DEFAULT_BROKER_WAIT_THRESHOLD}, 30 s). `0`
   * keeps every wait in the consumer, so no rung queue is declared.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(6, '10s').waitInBrokerFrom('1m')
   * ```
   */
  waitInBrokerFrom(threshold: Duration): RetryPolicy {
    return this.#with({ brokerWaitThresholdMs: toMillis(threshold, 'threshold') })
  }

  /**
   * The unjittered delay after attempt `attempt`: `initialDelay × multiplier^(attempt − 1)`,
   * capped at `maxDelay`, and never beyond `Number.MAX_SAFE_INTEGER` (so never `Infinity`).
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(5, '1s', '5s').delayAfter(4) // 5000 (8000 capped)
   * ```
   */
  delayAfter(attempt: number): number {
    return this.#delayAfter(checkAttempt(attempt))
  }

  #delayAfter(attempt: number): number {
    // 0 × Infinity is NaN, so a zero delay is answered before the power is taken.
    if (this.initialDelayMs === 0) return 0
    const raw = this.initialDelayMs * this.multiplier ** (attempt - 1)
    const bounded = raw <= Number.MAX_SAFE_INTEGER ? raw : Number.MAX_SAFE_INTEGER
    return this.maxDelayMs === undefined ? bounded : Math.min(bounded, this.maxDelayMs)
  }

  /**
   * The unjittered delays after attempts 1 to `maxAttempts − 1`, in milliseconds.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(5, '1s').schedule() // [1000, 2000, 4000, 8000]
   * ```
   */
  schedule(): number[] {
    const delays: number[] = []
    for (let attempt = 1; attempt < this.maxAttempts; attempt++) {
      delays.push(this.#delayAfter(attempt))
    }
    return delays
  }

  /**
   * The distinct scheduled delays that are spent in the broker, in order: one rung queue each.
   *
   * @example
   * ```ts
   * RetryPolicy.exponential(6, '10s', '5m').brokerRungs() // [40000, 80000, 160000]
   * ```
   */
  brokerRungs(): number[] {
    const rungs: number[] = []
    let previous: number | undefined
    // The schedule never decreases, and once two neighbours are equal it is flat for good
    // (capped, clamped, zero or a multiplier of 1): stopping there keeps a policy with
    // millions of attempts from walking all of them.
    for (let attempt = 1; attempt < this.maxAttempts; attempt++) {
      const delay = this.#delayAfter(attempt)
      if (delay === previous) break
      previous = delay
      if (this.waitsInBroker(delay)) rungs.push(delay)
    }
    return rungs
  }

  /**
   * Whether a wait of `delayMs` is spent in the broker: the threshold is not 0, the delay is
   * positive and at least the threshold.
   *
   * @example
   * ```ts
   * RetryPolicy.fixed(3, '1s').waitsInBroker(30_000) // true at the default 30 s threshold
   * ```
   */
  waitsInBroker(delayMs: number): boolean {
    return this.brokerWaitThresholdMs > 0 && delayMs > 0 && delayMs >= this.brokerWaitThresholdMs
  }

  /**
   * Why a message on attempt `attempt`, `ageMs` old, gets no more attempts, or `undefined`
   * when it does: attempts run out first (`gave up after N attempt(s)`), then age (`gave up on
   * a message older than 6h`). A message exactly at the age limit is given up on.
   *
   * @example
   * ```ts
   * RetryPolicy.fixed(3, '1s').giveUpReason(3, 0) // 'gave up after 3 attempt(s)'
   * ```
   */
  giveUpReason(attempt: number, ageMs: number): string | undefined {
    const current = checkAttempt(attempt)
    const age = checkAge(ageMs)
    if (current >= this.maxAttempts) return `gave up after ${current} attempt(s)`
    if (this.maxAgeMs > 0 && age >= this.maxAgeMs) {
      return `gave up on a message older than ${formatDuration(this.maxAgeMs)}`
    }
    return undefined
  }

  /**
   * The wait before the attempt after `attempt`, or `null` to give up (see
   * {@link RetryPolicy.giveUpReason}). A broker wait is the scheduled delay exactly, because
   * it names a rung queue; a consumer wait is jittered both ways,
   * `delay × (1 + (2u − 1) × jitter)` with `u = random()` in [0, 1), and never below 1 ms.
   *
   * @example
   * ```ts
   * const wait = policy.nextWait(envelope.attempt, envelopeAge(envelope, Date.now()))
   * if (wait === null) deadLetter()
   * else if (wait.inBroker) moveToRung(wait.delayMs)
   * else await sleep(wait.delayMs)
   * ```
   */
  nextWait(attempt: number, ageMs: number, random: () => number = Math.random): RetryWait | null {
    if (this.giveUpReason(attempt, ageMs) !== undefined) return null
    const delay = this.#delayAfter(attempt)
    if (this.waitsInBroker(delay)) return { delayMs: delay, inBroker: true }
    return { delayMs: this.#jittered(delay, random), inBroker: false }
  }

  #jittered(delay: number, random: () => number): number {
    const u = random()
    // A misbehaving random source must not push a wait outside the promised bounds.
    const unit = Number.isFinite(u) ? Math.min(Math.max(u, 0), 1) : 0.5
    const low = Math.ceil(delay * (1 - this.jitter))
    const high = Math.min(Math.floor(delay * (1 + this.jitter)), Number.MAX_SAFE_INTEGER)
    const spread = Math.round(delay * (1 + (2 * unit - 1) * this.jitter))
    // Rounding alone can step just outside [low, high] when the bounds are fractional.
    return Math.max(1, Math.min(Math.max(spread, low), high))
  }

  /**
   * The policy as the code that builds it: `exponential(5, 1s, 1m).giveUpAfter(6h)`.
   * Modifiers appear only when they differ from the factory's defaults.
   *
   * @example
   * ```ts
   * String(RetryPolicy.fixed(4, '30s')) // 'fixed(4, 30s)'
   * ```
   */
  toString(): string {
    let text: string
    switch (this.#kind) {
      case 'none':
        text = 'none()'
        break
      case 'fixed':
        text = `fixed(${this.maxAttempts}, ${formatDuration(this.initialDelayMs)})`
        break
      case 'exponential': {
        const cap = this.maxDelayMs === undefined ? '' : `, ${formatDuration(this.maxDelayMs)}`
        text = `exponential(${this.maxAttempts}, ${formatDuration(this.initialDelayMs)}${cap})`
        break
      }
    }
    if (this.maxAgeMs > 0) text += `.giveUpAfter(${formatDuration(this.maxAgeMs)})`
    if (this.jitter !== DEFAULT_JITTER[this.#kind]) text += `.withJitter(${this.jitter})`
    if (this.brokerWaitThresholdMs !== DEFAULT_BROKER_WAIT_THRESHOLD) {
      text += `.waitInBrokerFrom(${formatDuration(this.brokerWaitThresholdMs)})`
    }
    return text
  }
}
