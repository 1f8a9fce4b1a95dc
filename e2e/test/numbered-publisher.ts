import type { AceMq, Publisher } from '@acemq/core'

/** What happened to one numbered message on the publishing side. */
export interface PublishRecord {
  readonly id: string
  /** Sends tried, including the one that was confirmed. */
  attempts: number
  confirmed: boolean
  /** Error names of the failed sends, in order. */
  readonly errors: string[]
  /** When the first send started (`Date.now()`). */
  readonly firstSentAt: number
}

export interface NumberedPublisherOptions {
  /** How many messages: ids `${prefix}00001` … */
  readonly total: number
  readonly prefix?: string
  /** Sends in flight at once. */
  readonly window?: number
  /** New messages started per second (retries are not counted); `Infinity` for no limit. */
  readonly ratePerSecond?: number
  /** A message not confirmed within this long of its first send is given up on (recorded). */
  readonly giveUpAfterMs?: number
  /** Ids above this wait until {@link NumberedPublisher.allow} lets them start (default: all may). */
  readonly initialLimit?: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Publishes numbered messages (`f-00001` …) with confirms, as a careful producer would: a send
 * that fails for any reason — refused while the broker blocks publishing, failed while the
 * connection recovers, or lost with its confirm — is sent again, with the same id, until the
 * broker confirms it or `giveUpAfterMs` passes. A retried send whose first copy did reach the
 * queue makes a second copy with the same id: the idempotent consumers must handle it once.
 *
 * A fault driver steers it with {@link limit} (ids above it wait) and {@link ratePerSecond}.
 */
export class NumberedPublisher {
  readonly records = new Map<string, PublishRecord>()
  /** Failed sends by error name. */
  readonly errorCounts = new Map<string, number>()
  /** Ids above this wait to be started. */
  limit: number
  ratePerSecond: number
  readonly #publisher: Publisher<{ n: number }>
  readonly #total: number
  readonly #prefix: string
  readonly #window: number
  readonly #giveUpAfterMs: number
  readonly #changed = new Set<() => void>()
  readonly #extra = new Set<Promise<void>>()
  #next = 1
  #nextStartAt = 0
  #started = 0
  #confirmed = 0
  #stopped = false

  constructor(mq: AceMq, queue: string, options: NumberedPublisherOptions) {
    this.#publisher = mq.publisher<{ n: number }>('', queue)
    this.#total = options.total
    this.#prefix = options.prefix ?? 'f-'
    this.#window = options.window ?? 50
    this.ratePerSecond = options.ratePerSecond ?? Infinity
    this.#giveUpAfterMs = options.giveUpAfterMs ?? 120_000
    this.limit = options.initialLimit ?? options.total
  }

  /** The id of message `n`. */
  id(n: number): string {
    return `${this.#prefix}${String(n).padStart(5, '0')}`
  }

  /** Messages whose first send has started. */
  get started(): number {
    return this.#started
  }

  /** Messages the broker has confirmed. */
  get confirmed(): number {
    return this.#confirmed
  }

  /** Sends every message; resolves when each is confirmed or given up on. */
  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.#window }, () => this.#sender()))
    while (this.#extra.size > 0) await Promise.all([...this.#extra])
  }

  /**
   * Starts the next message at once, outside the window, the limit and the rate (it is
   * retried like any other). For a fault driver that needs a send now: while every send in the
   * window waits for a confirm the broker is holding back, nothing else would be tried.
   */
  startNext(): boolean {
    const n = this.#next
    if (n > this.#total) return false
    this.#next++
    const sending = this.#publish(n).finally(() => this.#extra.delete(sending))
    this.#extra.add(sending)
    return true
  }

  /** Lets ids up to `limit` start (a limit never goes down). */
  allow(limit: number): void {
    this.limit = Math.max(this.limit, Math.min(limit, this.#total))
    this.#notify()
  }

  /** Stops starting new messages (sends in flight finish). */
  stop(): void {
    this.#stopped = true
    this.#notify()
  }

  /** Resolves once `n` messages have started. */
  whenStarted(n: number): Promise<void> {
    return this.#when(() => this.#started >= Math.min(n, this.#total))
  }

  /** Resolves once every message up to `n` is confirmed (or given up on). */
  whenSettledUpTo(n: number): Promise<void> {
    return this.#when(() => {
      for (let i = 1; i <= n; i++) {
        const record = this.records.get(this.id(i))
        if (record === undefined || (!record.confirmed && !this.#gaveUp(record))) return false
      }
      return true
    })
  }

  #gaveUp(record: PublishRecord): boolean {
    return record.errors.at(-1) === 'gave up'
  }

  #when(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve()
    return new Promise((resolve) => {
      const check = (): void => {
        if (done()) {
          this.#changed.delete(check)
          resolve()
        }
      }
      this.#changed.add(check)
    })
  }

  #notify(): void {
    for (const check of [...this.#changed]) check()
  }

  async #sender(): Promise<void> {
    for (;;) {
      if (this.#stopped) return
      const n = this.#next
      if (n > this.#total) return
      if (n > this.limit) {
        await this.#when(() => this.#stopped || n <= this.limit || this.#next !== n)
        continue
      }
      this.#next++
      await this.#pace()
      await this.#publish(n)
    }
  }

  async #pace(): Promise<void> {
    if (!Number.isFinite(this.ratePerSecond)) return
    const now = Date.now()
    const at = Math.max(now, this.#nextStartAt)
    this.#nextStartAt = at + 1_000 / this.ratePerSecond
    if (at > now) await sleep(at - now)
  }

  async #publish(n: number): Promise<void> {
    const id = this.id(n)
    const firstSentAt = Date.now()
    const record: PublishRecord = { id, attempts: 0, confirmed: false, errors: [], firstSentAt }
    this.records.set(id, record)
    this.#started++
    this.#notify()
    let delay = 100
    for (;;) {
      record.attempts++
      try {
        await this.#publisher.send({ n }, { id })
        record.confirmed = true
        this.#confirmed++
        this.#notify()
        return
      } catch (error) {
        const name = error instanceof Error ? error.name : typeof error
        record.errors.push(name)
        this.errorCounts.set(name, (this.errorCounts.get(name) ?? 0) + 1)
      }
      if (Date.now() - firstSentAt > this.#giveUpAfterMs) {
        record.errors.push('gave up')
        this.#notify()
        return
      }
      await sleep(delay)
      delay = Math.min(delay * 2, 1_000)
    }
  }
}
