import { PublishFailedError, UnroutableError, type InMemoryTransport } from '../../src/index.js'
import {
  type Declaration,
  type Delivery,
  type OutgoingMessage,
  type SubscriptionStatus,
  type Transport,
  type TransportConsumeOptions,
  type TransportEvent,
  type TransportPublishOptions,
  type TransportState,
  type TransportSubscription,
} from '../../src/spi.js'
import type { VirtualClock } from './virtual-clock.js'

/** Why a delivery can no longer be settled. */
export type DeathCause = 'fault' | 'engine-close' | 'transport-close'

/** One delivery as the simulation tracks it. */
export interface SimDelivery extends Delivery {
  readonly serial: number
  readonly id: string
  readonly queue: string
  readonly subscription: SimSubscription
  readonly deliveredAt: number
  /** When and why its channel went (a fault, the engine closing it, the transport closing). */
  death: { readonly cause: DeathCause; readonly at: number } | undefined
  /** The settlement the transport wrote. */
  written:
    { readonly kind: 'ack' | 'nack'; readonly requeue: boolean; readonly at: number } | undefined
  /** Settlements asked for after one was written. */
  extraSettlements: number
  /** Copies the engine published of it (a move, a retry, a put-back). */
  readonly copies: PublishRecord[]
}

/** One publish, as the transport answered it. */
export interface PublishRecord {
  readonly id: string | undefined
  readonly exchange: string
  readonly routingKey: string
  readonly lane: 'application' | 'engine'
  /** The harness published it (an application publish); otherwise the engine did. */
  readonly byHarness: boolean
  readonly headers: Readonly<Record<string, unknown>>
  readonly at: number
  /** It reached a queue (whatever the answer). */
  enqueued: boolean
  outcome: 'pending' | 'confirmed' | 'failed'
  error: string | undefined
  /** The delivery it is a copy of, for the engine's copies. */
  readonly source: SimDelivery | undefined
}

/** One subscription, which outlives the channels the faults close under it. */
export interface SimSubscription {
  readonly serial: number
  readonly queue: string
  readonly options: TransportConsumeOptions
  readonly onDelivery: (delivery: Delivery) => void
  inner: TransportSubscription | undefined
  readonly live: Set<SimDelivery>
  cancelled: boolean
  closed: boolean
  /** The channel is down (a fault) and has not been subscribed again yet. */
  lost: boolean
  /** Channel losses by a fault, and by the consumer timeout. */
  losses: number
  consumerTimeouts: number
}

/** Per-queue broker settings the wrapper enforces. */
export interface QueueFaultSettings {
  /** Close the channel of a delivery left unsettled this long (RabbitMQ's consumer_timeout). */
  readonly consumerTimeoutMs?: number
  /** Dead-letter a message requeued this many times (a quorum queue's x-delivery-limit). */
  readonly deliveryLimit?: number
}

interface LateConfirm {
  readonly lane: 'application' | 'engine'
  readonly record: PublishRecord
  readonly reject: (error: Error) => void
  readonly timer: ReturnType<typeof setTimeout>
}

/**
 * Wraps the in-memory transport and injects faults: a publish nacked, a mandatory publish
 * returned unroutable, a confirm that comes late, a channel closed under a subscription, the
 * broker's consumer timeout, a quorum queue's delivery limit, and either connection (or both)
 * dropping for a while. The two publish lanes are modelled as channels: an application publish
 * to a missing exchange closes the application lane's channel, failing the confirms still
 * outstanding on it, and nothing on the engine's lane.
 *
 * Channel faults are made here, on top of the in-memory transport: the inner subscription is
 * closed (its unacked messages go back to the queue, as a broker does) and a new one opened.
 */
export class FaultTransport implements Transport {
  readonly kind = 'in-memory'
  readonly description = 'the simulation'
  readonly inner: InMemoryTransport
  readonly publishes: PublishRecord[] = []
  readonly deliveries: SimDelivery[] = []
  readonly subscriptions: SimSubscription[] = []
  readonly violations: string[] = []
  /** Set by the harness while it calls an application publish, so the record says so. */
  harnessPublishing = false
  readonly #clock: VirtualClock
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  readonly #settings: Map<string, QueueFaultSettings>
  readonly #bodies = new WeakMap<Uint8Array, SimDelivery>()
  readonly #requeues = new WeakMap<Uint8Array, number>()
  readonly #late = new Set<LateConfirm>()
  readonly #timers = new Set<ReturnType<typeof setTimeout>>()
  #nacks: { left: number; lane: 'application' | 'engine' | 'any' }[] = []
  #late_: { left: number; delayMs: number }[] = []
  readonly #unroutable = new Map<string, number>()
  #publishDownUntil = 0
  #consumeDown = false
  #closed = false
  #serial = 0
  #unsubscribeInner: () => void

  constructor(
    inner: InMemoryTransport,
    clock: VirtualClock,
    settings: Map<string, QueueFaultSettings>,
  ) {
    this.inner = inner
    this.#clock = clock
    this.#settings = settings
    this.#unsubscribeInner = inner.onEvent((event) => this.#emit(event))
  }

  get state(): TransportState {
    const state = this.inner.state
    const down = this.#publishDown() || this.#consumeDown
    return down && !state.closed ? { ...state, open: false } : state
  }

  /** Listeners the engine has not removed. */
  get listenerCount(): number {
    return this.#listeners.size
  }

  /** Timers of the wrapper's own still pending. */
  get timerCount(): number {
    return this.#timers.size
  }

  /** The delivery a handler's message came on (each delivery has a body of its own). */
  deliveryOf(body: Uint8Array): SimDelivery | undefined {
    return this.#bodies.get(body)
  }

  connect(): Promise<void> {
    return this.inner.connect()
  }

  declare(declarations: readonly Declaration[]): Promise<void> {
    return this.inner.declare(declarations)
  }

  // --- Faults -------------------------------------------------------------------------------

  /** The next `count` publishes on `lane` are nacked (not enqueued). */
  nack(count: number, lane: 'application' | 'engine' | 'any'): void {
    this.#nacks.push({ left: count, lane })
  }

  /** Mandatory publishes to `queue` through the default exchange come back unroutable. */
  unroutable(queue: string, forMs: number): void {
    this.#unroutable.set(queue, this.#clock.now + forMs)
  }

  /** The next `count` publishes are enqueued at once and confirmed `delayMs` later. */
  lateConfirms(count: number, delayMs: number): void {
    this.#late_.push({ left: count, delayMs })
  }

  /** Ends every publish fault still pending. Outages and channels heal on their own. */
  heal(): void {
    this.#nacks = []
    this.#late_ = []
    this.#unroutable.clear()
  }

  /** Closes the channel of every subscription to `queue`, as a channel error would. */
  closeChannel(queue: string, reason = 'simulated channel error'): void {
    for (const sub of this.subscriptions) {
      if (sub.queue === queue && !sub.closed && !sub.lost) this.#loseChannel(sub, reason, 0)
    }
  }

  /**
   * Drops the publishing connection, the consuming one, or both, for `outageMs`. A dropped
   * publishing connection fails the confirms outstanding on it; a dropped consuming one closes
   * every channel (deliveries go back to their queues) and subscribes again afterwards.
   */
  dropConnection(which: 'both' | 'publish' | 'consume', outageMs: number): void {
    if (this.#closed) return
    const wasOpen = !this.#publishDown() && !this.#consumeDown
    if (which !== 'consume') {
      this.#publishDownUntil = Math.max(this.#publishDownUntil, this.#clock.now + outageMs)
      for (const late of [...this.#late]) this.#failLate(late, 'the publishing connection dropped')
    }
    if (which !== 'publish' && !this.#consumeDown) {
      this.#consumeDown = true
      for (const sub of this.subscriptions) {
        if (!sub.closed && !sub.lost) this.#loseChannel(sub, 'the consuming connection dropped', -1)
      }
    }
    if (wasOpen)
      this.#emit({ type: 'disconnected', error: new Error(`simulated ${which} connection loss`) })
    this.#timer(() => {
      if (this.#closed) return
      if (which !== 'publish' && this.#consumeDown) {
        this.#consumeDown = false
        for (const sub of this.subscriptions)
          if (sub.lost && !sub.closed) void this.#resubscribe(sub)
      }
      if (!this.#publishDown() && !this.#consumeDown) this.#emit({ type: 'reconnected' })
    }, outageMs)
  }

  // --- Transport ----------------------------------------------------------------------------

  publish(message: OutgoingMessage, options: TransportPublishOptions = {}): Promise<void> {
    const lane = options.lane ?? 'application'
    const id = idOf(message.headers, message.properties.messageId)
    const record: PublishRecord = {
      id,
      exchange: message.exchange,
      routingKey: message.routingKey,
      lane,
      byHarness: this.harnessPublishing,
      headers: message.headers,
      at: this.#clock.now,
      enqueued: false,
      outcome: 'pending',
      error: undefined,
      source: this.#bodies.get(message.body),
    }
    this.publishes.push(record)
    record.source?.copies.push(record)
    if (!record.byHarness && lane !== 'engine') {
      this.violations.push(
        `the engine published a copy of ${id} to '${message.routingKey}' on the ${lane} lane, where an application's bad publish can fail it`,
      )
    }
    return this.#publish(message, options, record, lane).then(
      () => {
        record.outcome = 'confirmed'
      },
      (error: unknown) => {
        record.outcome = 'failed'
        record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
        throw error
      },
    )
  }

  async #publish(
    message: OutgoingMessage,
    options: TransportPublishOptions,
    record: PublishRecord,
    lane: 'application' | 'engine',
  ): Promise<void> {
    if (this.#closed || options.signal?.aborted) return this.inner.publish(message, options)
    if (this.#publishDown()) {
      throw new PublishFailedError(
        'simulated: the publishing connection is down: the message was not sent',
      )
    }
    const nack = this.#nacks.find((n) => n.left > 0 && (n.lane === 'any' || n.lane === lane))
    if (nack !== undefined) {
      nack.left--
      await Promise.resolve()
      throw new PublishFailedError('simulated: the broker nacked the message')
    }
    const until = this.#unroutable.get(message.routingKey)
    if (
      message.exchange === '' &&
      message.mandatory &&
      until !== undefined &&
      until > this.#clock.now
    ) {
      await Promise.resolve()
      throw new UnroutableError(message.exchange, message.routingKey)
    }
    const late = this.#late_.find((l) => l.left > 0)
    try {
      await this.inner.publish(message, options)
    } catch (error) {
      if (lane === 'application' && String(error).includes('NOT_FOUND')) {
        // As a channel error does: every confirm outstanding on the application lane fails.
        for (const pending of [...this.#late]) {
          if (pending.lane === 'application')
            this.#failLate(pending, 'the application channel closed (NOT_FOUND)')
        }
      }
      throw error
    }
    record.enqueued = true
    if (late === undefined) return
    late.left--
    await new Promise<void>((resolve, reject) => {
      const entry: LateConfirm = {
        lane,
        record,
        reject,
        timer: this.#timer(() => {
          this.#late.delete(entry)
          resolve()
        }, late.delayMs),
      }
      this.#late.add(entry)
    })
  }

  #failLate(late: LateConfirm, why: string): void {
    this.#late.delete(late)
    this.#clearTimer(late.timer)
    late.reject(new PublishFailedError(`simulated: ${why} before the confirm arrived`))
  }

  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    const sub: SimSubscription = {
      serial: ++this.#serial,
      queue,
      options,
      onDelivery,
      inner: undefined,
      live: new Set(),
      cancelled: false,
      closed: false,
      lost: false,
      losses: 0,
      consumerTimeouts: 0,
    }
    sub.inner = await this.#subscribeInner(sub)
    this.subscriptions.push(sub)
    return {
      cancel: async () => {
        sub.cancelled = true
        await sub.inner?.cancel()
      },
      close: async () => {
        if (sub.closed) return
        sub.closed = true
        sub.cancelled = true
        this.#kill(sub, 'engine-close')
        await sub.inner?.close()
      },
    }
  }

  onEvent(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const sub of this.subscriptions) {
      this.#kill(sub, 'transport-close')
      sub.closed = true
    }
    for (const late of [...this.#late]) this.#failLate(late, 'the transport closed')
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    await this.inner.close()
    this.#unsubscribeInner()
  }

  // --- Internals ----------------------------------------------------------------------------

  #publishDown(): boolean {
    return this.#publishDownUntil > this.#clock.now
  }

  #subscribeInner(sub: SimSubscription): Promise<TransportSubscription> {
    return this.inner.consume(sub.queue, { prefetch: sub.options.prefetch }, (delivery) =>
      this.#deliver(sub, delivery),
    )
  }

  #deliver(sub: SimSubscription, inner: Delivery): void {
    const settings = this.#settings.get(sub.queue) ?? {}
    const body = new Uint8Array(inner.body)
    const requeues = this.#requeues
    const innerBody = inner.body
    let timeout: ReturnType<typeof setTimeout> | undefined
    const settle = (kind: 'ack' | 'nack', requeue: boolean): boolean => {
      if (delivery.written !== undefined) {
        delivery.extraSettlements++
        return false
      }
      if (delivery.death !== undefined) return false
      let written: boolean
      if (kind === 'ack') written = inner.ack()
      else if (requeue && settings.deliveryLimit !== undefined) {
        const count = (requeues.get(innerBody) ?? 0) + 1
        requeues.set(innerBody, count)
        // Past the limit a quorum queue dead-letters the message instead of requeueing it.
        written = inner.nack(count < settings.deliveryLimit)
      } else written = inner.nack(requeue)
      if (!written) return false
      delivery.written = { kind, requeue, at: this.#clock.now }
      sub.live.delete(delivery)
      this.#clearTimer(timeout)
      return true
    }
    const delivery: SimDelivery = {
      serial: ++this.#serial,
      id: idOf(inner.headers, inner.properties.messageId) ?? '?',
      queue: sub.queue,
      subscription: sub,
      deliveredAt: this.#clock.now,
      death: undefined,
      written: undefined,
      extraSettlements: 0,
      copies: [],
      body,
      headers: inner.headers,
      properties: inner.properties,
      exchange: inner.exchange,
      routingKey: inner.routingKey,
      redelivered: inner.redelivered,
      get wireHeaders() {
        return inner.wireHeaders
      },
      get settleable() {
        return (
          delivery.written === undefined &&
          delivery.death === undefined &&
          inner.settleable !== false
        )
      },
      ack: () => settle('ack', false),
      nack: (requeue) => settle('nack', requeue),
    }
    this.#bodies.set(body, delivery)
    this.deliveries.push(delivery)
    sub.live.add(delivery)
    if (settings.consumerTimeoutMs !== undefined) {
      timeout = this.#timer(() => {
        if (delivery.settleable && !sub.closed && !sub.lost) {
          sub.consumerTimeouts++
          this.#loseChannel(
            sub,
            `simulated consumer_timeout: delivery unacknowledged for ${settings.consumerTimeoutMs} ms`,
            0,
          )
        }
      }, settings.consumerTimeoutMs)
    }
    sub.onDelivery(delivery)
  }

  /** Every unsettled delivery of `sub` can no longer be settled. */
  #kill(sub: SimSubscription, cause: DeathCause): void {
    for (const delivery of sub.live) {
      delivery.death ??= { cause, at: this.#clock.now }
    }
    sub.live.clear()
  }

  /**
   * The channel under `sub` closes: its deliveries go back to the queue, the engine is told,
   * and (unless the subscription was cancelled, or `reconnectMs` is negative: the connection
   * brings it back) it is subscribed again after `reconnectMs`.
   */
  #loseChannel(sub: SimSubscription, reason: string, reconnectMs: number): void {
    sub.lost = true
    sub.losses++
    this.#kill(sub, 'fault')
    const inner = sub.inner
    sub.inner = undefined
    void inner?.close()
    try {
      sub.options.onStatus?.({
        type: 'channel-lost',
        error: new Error(reason),
      } satisfies SubscriptionStatus)
    } catch (error) {
      this.violations.push(`onStatus threw: ${String(error)}`)
    }
    if (reconnectMs >= 0) this.#timer(() => void this.#resubscribe(sub), reconnectMs)
  }

  async #resubscribe(sub: SimSubscription): Promise<void> {
    if (this.#closed || sub.closed || sub.cancelled || !sub.lost || this.#consumeDown) return
    sub.lost = false
    const inner = await this.#subscribeInner(sub)
    if (sub.closed || sub.cancelled) {
      await inner.close()
      return
    }
    sub.inner = inner
    sub.options.onStatus?.({ type: 'consuming' })
  }

  #timer(fn: () => void, ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      fn()
    }, ms)
    this.#timers.add(timer)
    return timer
  }

  #clearTimer(timer: ReturnType<typeof setTimeout> | undefined): void {
    if (timer === undefined) return
    clearTimeout(timer)
    this.#timers.delete(timer)
  }

  #emit(event: TransportEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event)
      } catch (error) {
        this.violations.push(`a transport event listener threw: ${String(error)}`)
      }
    }
  }
}

/** The AceMQ id of a message: `x-acemq-id`, else its message id. */
export function idOf(
  headers: Readonly<Record<string, unknown>>,
  messageId: string | undefined,
): string | undefined {
  const header = headers['x-acemq-id']
  if (typeof header === 'string') return header
  return messageId
}
