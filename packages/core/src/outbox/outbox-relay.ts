import { toMillis, type Duration } from '../duration.js'
import { createEnvelope, writeEnvelope } from '../envelope/envelope.js'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  PublishingPausedError,
  describeError,
} from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { HealthContributor, HealthReport } from '../health/health.js'
import { sleep } from '../internal/timers.js'
import type { Instrumentation } from '../telemetry/instrumentation.js'
import type { OutgoingMessage, Transport } from '../transport/transport.js'
import { LeaseKeeper, type KeptLease } from './lease-keeper.js'
import { blamesRecord, isConnectionTrouble, seconds, storeMaxAttempts } from './publish-outcome.js'
import type { OutboxFailure, OutboxStore, StoredOutboxRecord } from './outbox-store.js'

/** Records one relay round claims and publishes (100). */
export const DEFAULT_OUTBOX_BATCH = 100
/** How long a running relay waits after finding the outbox empty (1 s). */
export const DEFAULT_OUTBOX_POLL = 1_000
/** How long a claimed record stays leased to the relay that claimed it (30 s). */
export const DEFAULT_OUTBOX_LEASE = 30_000
/** The oldest pending record's age past which the outbox reports DEGRADED (5 min). */
export const DEFAULT_OUTBOX_LAG_THRESHOLD = 300_000
/**
 * How long a record whose publish failed is held back before it is offered again, the first
 * time (5 s); it doubles with each failure up to {@link DEFAULT_OUTBOX_MAX_RETRY_DELAY}. With
 * the default 10 attempts a record that keeps failing is retired after about 30 minutes
 * (5 + 10 + 20 + … + 600 + 600 s), longer than a rolling deploy that brings its exchange.
 */
export const DEFAULT_OUTBOX_RETRY_DELAY = 5_000
/** The longest a failed record is held back between two attempts (10 min). */
export const DEFAULT_OUTBOX_MAX_RETRY_DELAY = 600_000

/** Tries of one `markPublished` before the round gives up on it (the records' lease runs out). */
const MARK_TRIES = 5
/** The wait before the second try of a mark; it doubles (0.1 + 0.2 + 0.4 + 0.8 s at most). */
const MARK_RETRY_DELAY_MS = 100

/**
 * Options of `mq.outbox(store, options)`.
 *
 * @example
 * ```ts
 * mq.outbox(store, { batch: 200, poll: '500ms', lease: '1m', lagThreshold: '10m' })
 * ```
 */
export interface OutboxRelayOptions {
  /** Records claimed and published per round (default 100). */
  readonly batch?: number
  /** How long a running relay waits after a round that found less than a batch (default 1 s). */
  readonly poll?: Duration
  /** How long a claim lasts: longer than a round takes (default 30 s). */
  readonly lease?: Duration
  /** DEGRADED when the oldest pending record is older than this (default 5 min). */
  readonly lagThreshold?: Duration
  /** The health report's name (default `outbox`); two running relays need two names. */
  readonly name?: string
  /** Failed publishes before a record is retired (default: the store's `maxAttempts`, 10). */
  readonly maxAttempts?: number
  /**
   * How long a record whose publish failed waits before it is offered again, the first time
   * (default 5 s); doubled with each further failure, up to `maxRetryDelay`. `0`: at once.
   */
  readonly retryDelay?: Duration
  /** The longest wait between two attempts of one record (default 10 min). */
  readonly maxRetryDelay?: Duration
}

/** What a relay needs from its connection. Internal to core. */
export interface OutboxRelayHost {
  readonly transport: Transport
  readonly origin: string
  readonly instrumentation: Instrumentation | undefined
  readonly publishingPaused: boolean
  readonly closed: boolean
  registerHealth(contributor: HealthContributor): () => void
  reportError(error: unknown, context: string): void
  relayStarted(relay: OutboxRelay): void
  relayStopped(relay: OutboxRelay): void
}

/** What publishing one batch did. */
interface RelayedBatch {
  readonly confirmed: readonly StoredOutboxRecord[]
  /** The connection could not publish some: they were handed back. */
  readonly stalled: boolean
}

/** What a run of rounds did. */
interface Rounds {
  readonly published: number
  /** The connection could not publish: the claimed records were handed back. */
  readonly stalled: boolean
}

/**
 * The outbox relay: claims leased batches of records from an {@link OutboxStore}, publishes
 * each (confirmed and mandatory, the record's id as the envelope id) and marks them
 * published once the broker has confirmed them. A publish the broker refuses (unroutable,
 * nacked, a missing exchange) is marked failed with the reason, and after the store's
 * `maxAttempts` the record is retired; a publish that fails because the connection is down,
 * blocked or paused hands the records back without counting against them. A relay that dies
 * between the confirm and the mark publishes the record again after its lease: the
 * consumer's idempotency store catches the copy. Get one from `mq.outbox(store)`.
 *
 * @example
 * ```ts
 * const relay = mq.outbox(outbox, { batch: 100, poll: '1s', lease: '30s' })
 * relay.start()
 * // ... mq.close() stops it after its round.
 * ```
 */
export class OutboxRelay {
  /** The store the relay reads. */
  readonly store: OutboxStore
  /** The health report's name. */
  readonly name: string
  readonly #host: OutboxRelayHost
  readonly #batch: number
  readonly #pollMs: number
  readonly #leaseMs: number
  readonly #lagThresholdMs: number
  readonly #maxAttempts: number | undefined
  readonly #retryDelayMs: number
  readonly #maxRetryDelayMs: number
  readonly #leases: LeaseKeeper
  #published = 0
  #failed = 0
  #loop: Promise<void> | undefined
  #stopping: AbortController | undefined
  #unregister: (() => void) | undefined
  readonly #running = new Set<Promise<Rounds>>()
  #lastError: string | undefined

  /**
   * Created by `mq.outbox()`.
   *
   * @internal
   */
  constructor(host: OutboxRelayHost, store: OutboxStore, options: OutboxRelayOptions = {}) {
    if (
      typeof store !== 'object' ||
      store === null ||
      typeof store.claimBatch !== 'function' ||
      typeof store.markPublished !== 'function' ||
      typeof store.markFailed !== 'function' ||
      typeof store.stats !== 'function'
    ) {
      throw new ConfigurationError(
        `outbox(store) needs an OutboxStore (claimBatch, markPublished, markFailed, release, stats, ...); got ${String(store)}`,
      )
    }
    const batch = options.batch ?? DEFAULT_OUTBOX_BATCH
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > 10_000) {
      throw new ConfigurationError(
        `outbox(options.batch) must be a whole number from 1 to 10000; got ${String(batch)}`,
      )
    }
    this.#pollMs = toMillis(options.poll ?? DEFAULT_OUTBOX_POLL, 'outbox(options.poll)')
    this.#leaseMs = toMillis(options.lease ?? DEFAULT_OUTBOX_LEASE, 'outbox(options.lease)')
    if (this.#leaseMs < 1) {
      throw new ConfigurationError(`outbox(options.lease) must be longer than 0 ms`)
    }
    this.#lagThresholdMs = toMillis(
      options.lagThreshold ?? DEFAULT_OUTBOX_LAG_THRESHOLD,
      'outbox(options.lagThreshold)',
    )
    if (
      options.maxAttempts !== undefined &&
      (!Number.isSafeInteger(options.maxAttempts) || options.maxAttempts < 1)
    ) {
      throw new ConfigurationError(
        `outbox(options.maxAttempts) must be a whole number of at least 1; got ${String(options.maxAttempts)}`,
      )
    }
    this.#maxAttempts = options.maxAttempts
    this.#retryDelayMs = toMillis(
      options.retryDelay ?? DEFAULT_OUTBOX_RETRY_DELAY,
      'outbox(options.retryDelay)',
    )
    this.#maxRetryDelayMs = toMillis(
      options.maxRetryDelay ?? DEFAULT_OUTBOX_MAX_RETRY_DELAY,
      'outbox(options.maxRetryDelay)',
    )
    if (this.#maxRetryDelayMs < this.#retryDelayMs) {
      throw new ConfigurationError(
        `outbox(options.maxRetryDelay) must be at least retryDelay (${this.#retryDelayMs} ms); got ${this.#maxRetryDelayMs} ms`,
      )
    }
    const name = options.name ?? 'outbox'
    if (typeof name !== 'string' || name === '') {
      throw new ConfigurationError(`outbox(options.name) must be a non-empty string`)
    }
    this.#host = host
    this.store = store
    this.name = name
    this.#batch = batch
    this.#leases = new LeaseKeeper(store, this.#leaseMs, (error, context) =>
      host.reportError(error, context),
    )
  }

  /** How long a record is held back after its first failed publish, ms. */
  get retryDelayMs(): number {
    return this.#retryDelayMs
  }

  /** The longest a record is held back between two attempts, ms. */
  get maxRetryDelayMs(): number {
    return this.#maxRetryDelayMs
  }

  /** Records this relay published (confirmed by the broker). */
  get published(): number {
    return this.#published
  }

  /** Publishes of this relay that failed and were counted against their record. */
  get failed(): number {
    return this.#failed
  }

  /** Whether {@link start} is in effect. */
  get isRunning(): boolean {
    return this.#loop !== undefined && this.#stopping?.signal.aborted === false
  }

  /**
   * Starts relaying in the background: a round after another while there is a full batch,
   * then one every `poll`; registers the health report. Safe to call twice.
   *
   * @example
   * ```ts
   * mq.outbox(store).start()
   * ```
   */
  start(): void {
    if (this.isRunning) return
    if (this.#host.closed) throw new ClosedError()
    // A stop still under way has not taken its run's report back yet: this run's replaces it.
    this.#unregister?.()
    this.#unregister = this.#host.registerHealth(this.#healthContributor())
    const stopping = new AbortController()
    this.#stopping = stopping
    this.#host.relayStarted(this)
    const previous = this.#loop ?? Promise.resolve()
    this.#loop = previous.then(() => this.#run(stopping.signal))
  }

  /**
   * Stops relaying: the round under way finishes (its publishes confirmed and marked), then
   * the relay stops and its health report goes. Safe to call twice.
   *
   * @example
   * ```ts
   * await relay.stop()
   * ```
   */
  async stop(): Promise<void> {
    this.#stopping?.abort()
    const loop = this.#loop
    await loop
    if (this.#loop === loop) {
      this.#loop = undefined
      this.#unregister?.()
      this.#unregister = undefined
      this.#host.relayStopped(this)
    }
    await Promise.allSettled([...this.#running])
  }

  /**
   * Relays what is pending now, round after round, until a round finds less than a full
   * batch; resolves with how many records it published. Rejects when the store fails or the
   * connection cannot publish (the claimed records are handed back).
   *
   * @example
   * ```ts
   * await outbox.add(OutboxRecord.of('', 'orders.placed', order))
   * await mq.outbox(outbox).drainOnce() // 1
   * ```
   */
  async drainOnce(): Promise<number> {
    if (this.#host.closed) throw new ClosedError()
    const { published, stalled } = await this.#track(this.#rounds(() => true))
    if (stalled) {
      throw new ClosedError(
        `the outbox relay could not publish: ${this.#lastError ?? 'the connection is not open'}`,
      )
    }
    return published
  }

  async #run(signal: AbortSignal): Promise<void> {
    const canPublish = (): boolean =>
      !signal.aborted && !this.#host.publishingPaused && this.#host.transport.state.open
    while (!signal.aborted) {
      try {
        if (canPublish()) await this.#track(this.#rounds(canPublish))
      } catch (error) {
        this.#lastError = describeError(error)
        this.#host.reportError(error, 'the outbox relay could not finish a round; it tries again')
      }
      // The outbox had less than a batch (or could not be relayed): wait before looking again.
      await sleep(this.#pollMs, signal)
    }
  }

  #track(rounds: Promise<Rounds>): Promise<Rounds> {
    this.#running.add(rounds)
    const forget = (): void => {
      this.#running.delete(rounds)
    }
    rounds.then(forget, forget)
    return rounds
  }

  /**
   * Rounds back to back while batches come back full and `more()` says so, pipelined: the next
   * batch is claimed while this one is published, and this one is marked while the next is
   * published, so the database and the broker work at the same time. A record is still marked
   * only after its own confirm; a batch claimed but never published is handed back. A mark is
   * tried a few times; one that still fails ends the rounds — after the batch published
   * meanwhile has been marked too, so one failed mark costs one batch published again, never
   * two.
   */
  async #rounds(more: () => boolean): Promise<Rounds> {
    let published = 0
    let stalled = false
    let marking: Promise<void> | undefined
    let markFailure: { readonly error: unknown } | undefined
    let claiming: Promise<KeptLease> | undefined = this.#claim()
    try {
      while (claiming !== undefined) {
        const next: Promise<KeptLease> = claiming
        claiming = undefined
        const claimed = await next
        if (claimed.records.length === 0) {
          claimed.stop()
          break
        }
        if (claimed.records.length >= this.#batch && more()) claiming = this.#claim()
        let round: RelayedBatch
        try {
          round = await this.#relayBatch(claimed.records)
        } finally {
          claimed.stop()
        }
        published += round.confirmed.length
        // One mark at a time: the previous one has to be done before this one starts.
        if (marking !== undefined) await marking
        marking = this.#markPublished(round.confirmed).catch((error: unknown) => {
          markFailure ??= { error }
        })
        if (round.stalled) {
          stalled = true
          break
        }
        if (markFailure !== undefined) break
      }
    } finally {
      if (marking !== undefined) await marking
      if (claiming !== undefined) await this.#handBack(claiming)
    }
    if (markFailure !== undefined) throw markFailure.error
    return { published, stalled }
  }

  #claim(): Promise<KeptLease> {
    const claiming = this.store
      .claimBatch(this.#batch, this.#leaseMs)
      .then((records) => this.#leases.keep(records))
    // Awaited later, or handed back: never an unhandled rejection meanwhile.
    claiming.catch(() => undefined)
    return claiming
  }

  /** A batch claimed ahead that will not be published now: its records go back at once. */
  async #handBack(claiming: Promise<KeptLease>): Promise<void> {
    let claimed: KeptLease
    try {
      claimed = await claiming
    } catch (error) {
      this.#host.reportError(error, 'the outbox relay could not claim its next batch')
      return
    }
    claimed.stop()
    if (claimed.records.length === 0) return
    try {
      await this.#release(claimed.records)
    } catch (error) {
      // Their lease runs out on its own.
      this.#host.reportError(
        error,
        'the outbox relay could not hand back a batch it claimed; its lease runs out on its own',
      )
    }
  }

  #release(records: readonly StoredOutboxRecord[]): Promise<void> {
    const ids = records.map((record) => record.id)
    const lease = records[0]?.lease
    return lease === undefined ? this.store.release(ids) : this.store.release(ids, lease)
  }

  /**
   * Marks the confirmed records published: only after their confirms. A failed mark is tried
   * again (at most {@link MARK_TRIES} times, backing off), since records left unmarked are
   * published again once their lease runs out.
   */
  async #markPublished(confirmed: readonly StoredOutboxRecord[]): Promise<void> {
    if (confirmed.length === 0) return
    const ids = confirmed.map((record) => record.id)
    for (let tried = 1; ; tried++) {
      try {
        await this.store.markPublished(ids)
        break
      } catch (error) {
        if (tried >= MARK_TRIES) throw error
        this.#host.reportError(
          error,
          `the outbox relay could not mark ${ids.length} published records (try ${tried} of ${MARK_TRIES}); it tries again`,
        )
        await sleep(MARK_RETRY_DELAY_MS * 2 ** (tried - 1))
      }
    }
    this.#published += confirmed.length
    const now = Date.now()
    for (const record of confirmed) this.#report(record, 'published', now)
  }

  /**
   * Publishes a batch; charges the records the broker refused and hands back what the
   * connection failed. A publish that failed without blaming its record (the channel closed
   * under it — a publish to a deleted exchange closes the channel for every publish in flight
   * on it — or a nack) is published once more, on the fresh channel, before anything is
   * charged: so only the record at fault pays.
   */
  async #relayBatch(records: readonly StoredOutboxRecord[]): Promise<RelayedBatch> {
    const transport = this.#host.transport
    const confirmed: StoredOutboxRecord[] = []
    const refused: { record: StoredOutboxRecord; error: unknown }[] = []
    const handBack: StoredOutboxRecord[] = []
    let unsure: { record: StoredOutboxRecord; error: unknown }[] = []
    for (const pass of [1, 2]) {
      const batch = pass === 1 ? records : unsure.map((entry) => entry.record)
      if (batch.length === 0) break
      unsure = []
      const results = await Promise.allSettled(batch.map((record) => this.#publish(record)))
      results.forEach((result, i) => {
        const record = batch[i] as StoredOutboxRecord
        if (result.status === 'fulfilled') confirmed.push(record)
        else if (isConnectionTrouble(result.reason, transport)) {
          handBack.push(record)
          this.#lastError = describeError(result.reason)
        } else if (pass === 1 && !blamesRecord(result.reason)) {
          unsure.push({ record, error: result.reason })
        } else refused.push({ record, error: result.reason })
      })
    }
    for (const { record, error } of refused) await this.#charge(record, error)
    if (handBack.length > 0) await this.#release(handBack)
    return { confirmed, stalled: handBack.length > 0 }
  }

  /** Charges a failed publish to its record, holds it back, and says so. */
  async #charge(record: StoredOutboxRecord, error: unknown): Promise<void> {
    const attempt = record.attempts + 1
    const retryInMs = Math.min(
      this.#maxRetryDelayMs,
      this.#retryDelayMs * 2 ** Math.min(record.attempts, 40),
    )
    const options = {
      retryInMs,
      ...(this.#maxAttempts === undefined ? {} : { maxAttempts: this.#maxAttempts }),
      ...(record.lease === undefined ? {} : { lease: record.lease }),
    }
    const outcome: OutboxFailure = await this.store.markFailed(
      record.id,
      describeError(error),
      options,
    )
    this.#lastError = describeError(error)
    if (outcome === 'lapsed') {
      this.#host.reportError(
        error,
        `the outbox relay could not publish outbox record '${record.id}', but its lease had lapsed and another relay holds it: nothing was charged`,
      )
      return
    }
    this.#failed++
    this.#report(record, 'failed', Date.now())
    const limit = this.#maxAttempts ?? storeMaxAttempts(this.store)
    if (outcome === 'retired') {
      // Always said, one report per record (never folded into another's).
      this.#host.reportError(
        new AceMqError(
          `outbox record '${record.id}' was retired after ${attempt} failed publishes (exchange '${record.exchange}', routing key '${record.routingKey}') and is offered no more until it is re-offered (store.reoffer() or \`acemq outbox reoffer\`): ${describeError(error)}`,
          { code: errorCodeOf(error) ?? ErrorCodes.ERROR, cause: error },
        ),
        'the outbox relay retired a record',
      )
      return
    }
    this.#host.reportError(
      error,
      `the outbox relay could not publish outbox record '${record.id}' (failed attempt ${attempt}${limit === undefined ? '' : ` of ${limit}`}); it is offered again in ${seconds(retryInMs)}`,
    )
  }

  #publish(record: StoredOutboxRecord): Promise<void> {
    const envelope = createEnvelope(
      { ...record.envelope, id: record.id, firstSeen: record.createdAt },
      { routingKey: record.routingKey, origin: this.#host.origin },
    )
    const message: OutgoingMessage = {
      exchange: record.exchange,
      routingKey: record.routingKey,
      body: record.body,
      headers: writeEnvelope(envelope, record.headers),
      properties: { contentType: record.contentType, messageId: record.id },
      persistent: true,
      // Never fire-and-forget: a record no queue takes is a failure, not a publish.
      mandatory: true,
    }
    const scope = this.#host.instrumentation?.publishStarted({
      exchange: message.exchange,
      routingKey: message.routingKey,
      messageId: envelope.id,
      correlation: envelope.correlation,
      headers: message.headers,
    })
    if (this.#host.publishingPaused) {
      const refused = new PublishingPausedError(record.exchange, record.routingKey)
      scope?.end('refused', refused)
      return Promise.reject(refused)
    }
    const publishing = this.#host.transport.publish(message)
    if (scope === undefined) return publishing
    return publishing.then(
      () => scope.end('confirmed'),
      (error: unknown) => {
        scope.end('failed', error)
        throw error
      },
    )
  }

  #report(record: StoredOutboxRecord, outcome: 'published' | 'failed', now: number): void {
    this.#host.instrumentation?.outboxRelayed?.({
      exchange: record.exchange,
      routingKey: record.routingKey,
      outcome,
      lagMs: Math.max(0, now - record.createdAt),
    })
  }

  #healthContributor(): HealthContributor {
    return {
      name: this.name,
      report: async (): Promise<HealthReport> => {
        const details: Record<string, string> = {
          running: String(this.isRunning),
          published: String(this.#published),
          failed: String(this.#failed),
        }
        try {
          const stats = await this.store.stats()
          const lagMs =
            stats.oldestPendingAt === undefined ? 0 : Math.max(0, stats.now - stats.oldestPendingAt)
          details['pending'] = String(stats.pending)
          details['retired'] = String(stats.retired)
          details['lagSeconds'] = String(Math.floor(lagMs / 1000))
          if (this.#lastError !== undefined) details['lastError'] = this.#lastError
          const degraded = stats.retired > 0 || lagMs > this.#lagThresholdMs
          return { name: this.name, status: degraded ? 'DEGRADED' : 'UP', details }
        } catch (error) {
          // The store is out of reach: the relay waits for it, so restarting would not help.
          details['error'] = describeError(error)
          return { name: this.name, status: 'DEGRADED', details }
        }
      },
    }
  }
}
