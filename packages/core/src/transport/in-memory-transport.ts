import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  PublishFailedError,
  UnroutableError,
  abortError,
} from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { headerInteger, headerString } from '../envelope/envelope.js'
import type {
  Declaration,
  Delivery,
  ExchangeType,
  Headers,
  HeaderValue,
  MessageProperties,
  OutgoingMessage,
  SubscriptionStatus,
  Transport,
  TransportConsumeOptions,
  TransportEvent,
  TransportPublishOptions,
  TransportState,
  TransportSubscription,
} from './transport.js'

/**
 * The `x-delivery-limit` of a quorum queue declared without one: RabbitMQ 4 gives every quorum
 * queue a limit of 20 returns (RabbitMQ 3.x had none), and the in-memory transport models 4.
 */
export const DEFAULT_QUORUM_DELIVERY_LIMIT = 20

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 2_147_483_647

/** Options for an {@link InMemoryTransport}. */
export interface InMemoryTransportOptions {
  /**
   * RabbitMQ's `consumer_timeout`, in milliseconds: a delivery left unacknowledged for longer
   * has its channel closed ("delivery acknowledgement timed out") and goes back to the queue.
   * A queue's own `x-consumer-timeout` argument wins. Default: none.
   */
  readonly consumerTimeoutMs?: number
}

/** Which side of the connection {@link InMemoryTransport.simulateConnectionLoss} drops. */
export type SimulatedConnection = 'both' | 'publish' | 'consume'

/** A message as it sits in an in-memory queue. */
export interface StoredMessage {
  readonly body: Uint8Array
  /** The headers as published, integer widths included. */
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly persistent: boolean
  readonly redelivered: boolean
}

interface QueuedMessage extends StoredMessage {
  /** Publish order within its queue: a classic queue puts a requeued message back by it. */
  readonly seq: number
  /** When the message expires (epoch ms): the queue's `x-message-ttl` or its own `expiration`. */
  readonly expiresAt: number | undefined
  /** How many times a quorum queue has had it back (RabbitMQ's `delivery_count`). */
  readonly returns: number
}

interface MemoryBinding {
  readonly queue: string
  readonly routingKey: string
  /** The arguments as the broker keys them: two bindings differ when these do. */
  readonly identity: string
  /** For a headers exchange: the match mode and the table to match. */
  readonly match: HeadersMatch | undefined
}

interface MemoryExchange {
  readonly name: string
  readonly type: ExchangeType
  readonly durable: boolean
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly bindings: MemoryBinding[]
}

interface MemoryQueue {
  readonly name: string
  readonly type: 'classic' | 'quorum'
  readonly durable: boolean
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly ttlMs: number | undefined
  /** Returns before a quorum queue drops or dead-letters a message; undefined: no limit. */
  readonly deliveryLimit: number | undefined
  readonly consumerTimeoutMs: number | undefined
  /** Ready messages, in delivery order. */
  readonly ready: QueuedMessage[]
  /** A quorum queue's returned messages lead `ready`: how many of them there are. */
  returned: number
  readonly subscriptions: MemorySubscription[]
  next: number
  nextSeq: number
  timer: ReturnType<typeof setTimeout> | undefined
  timerDue: number
}

interface MemorySubscription {
  readonly queue: MemoryQueue
  readonly prefetch: number
  readonly onDelivery: (delivery: Delivery) => void
  readonly onStatus: ((status: SubscriptionStatus) => void) | undefined
  /** Deliveries not yet settled, in delivery order. */
  readonly unacked: Set<InFlightDelivery>
  /** The subscription's channel: every loss starts a new one, and voids the old deliveries. */
  epoch: number
  channelOpen: boolean
  cancelled: boolean
  closed: boolean
}

interface InFlightDelivery {
  readonly message: QueuedMessage
  readonly subscription: MemorySubscription
  readonly epoch: number
  settled: boolean
  timer: ReturnType<typeof setTimeout> | undefined
}

type DeathReason = 'expired' | 'rejected' | 'delivery_limit'

/** The queue arguments RabbitMQ compares when a queue is declared again (3.10). */
const COMPARED_QUEUE_ARGUMENTS = [
  'x-expires',
  'x-message-ttl',
  'x-dead-letter-exchange',
  'x-dead-letter-routing-key',
  'x-max-length',
  'x-max-length-bytes',
  'x-max-in-memory-length',
  'x-max-in-memory-bytes',
  'x-max-priority',
  'x-overflow',
  'x-queue-mode',
  'x-single-active-consumer',
  'x-quorum-initial-group-size',
  'x-max-age',
  'x-stream-max-segment-size-bytes',
  'x-initial-cluster-size',
  'x-queue-leader-locator',
  'x-delivery-limit',
] as const

/** The exchanges every RabbitMQ virtual host starts with. */
const PREDECLARED: readonly (readonly [string, ExchangeType])[] = [
  ['amq.direct', 'direct'],
  ['amq.fanout', 'fanout'],
  ['amq.topic', 'topic'],
  ['amq.headers', 'headers'],
  ['amq.match', 'headers'],
]

/**
 * A transport that keeps exchanges and queues in this process, modelled on RabbitMQ so that
 * handlers, retry policies, shutdown and fault schedules can be tested without a broker; it is
 * also the demo's embedded default. Not durable, not shared between processes.
 *
 * The RabbitMQ rules it follows, each checked by a parity suite that runs the same assertions
 * on RabbitMQ:
 * - routing on direct, topic, fanout and headers exchanges (`x-match` `all`, `any`,
 *   `all-with-x`, `any-with-x`, values compared as the broker compares them), bindings told
 *   apart by their arguments, the predeclared `amq.*` exchanges, `alternate-exchange`;
 * - mandatory returns, a failed publish to a missing exchange; confirms arrive asynchronously;
 * - queue TTL and per-message `expiration`, dead-lettering with `x-death` (counted per queue
 *   and reason), `x-first-death-*` and `original-expiration`, and dead-letter cycles dropped;
 * - per-consumer prefetch (0: no limit), the redelivered flag, a classic queue putting a
 *   requeued message back in its place, a quorum queue returning it to its head;
 * - `x-delivery-limit` on quorum queues, with `x-delivery-count` on redeliveries: every return
 *   (a nack with requeue, a closed channel) counts, and past the limit the message is
 *   dead-lettered (`delivery_limit`) or dropped;
 * - which declarations are refused (`PRECONDITION_FAILED`, `ACCESS_REFUSED`, `NOT_FOUND`).
 *
 * Where RabbitMQ versions differ it follows RabbitMQ 4: a quorum queue declared without a limit
 * gets {@link DEFAULT_QUORUM_DELIVERY_LIMIT} (3.x had none), a negative limit means none (3.x
 * dropped every returned message), and a queue's `x-consumer-timeout` is honoured (3.12+).
 * Blocked connections, connection loss, channel errors and the consumer timeout are simulated
 * through the test and demo controls below.
 *
 * @example
 * ```ts
 * const transport = new InMemoryTransport()
 * await using mq = await AceMq.connect(transport)
 * // ... after the test:
 * transport.messageCount('orders.placed.dlq') // 1
 * ```
 */
export class InMemoryTransport implements Transport {
  readonly kind = 'in-memory'
  readonly description = 'this process'

  readonly #exchanges = new Map<string, MemoryExchange>()
  readonly #queues = new Map<string, MemoryQueue>()
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  readonly #unblockWaiters = new Set<() => void>()
  readonly #timers = new Set<ReturnType<typeof setTimeout>>()
  readonly #outageEnds = new Set<() => void>()
  readonly #reopens = new Set<ReturnType<typeof setImmediate>>()
  readonly #consumerTimeoutMs: number | undefined
  #connected = false
  #closed = false
  #publishOutages = 0
  #consumeOutages = 0
  #reportedOpen = false
  #blockedReason: string | undefined
  #dispatch: ReturnType<typeof setImmediate> | undefined

  constructor(options: InMemoryTransportOptions = {}) {
    const timeout = options.consumerTimeoutMs
    if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) {
      throw new ConfigurationError(
        `consumerTimeoutMs must be a positive number of milliseconds; got ${String(timeout)}`,
      )
    }
    this.#consumerTimeoutMs = timeout
    for (const [name, type] of PREDECLARED) {
      this.#exchanges.set(name, { name, type, durable: true, arguments: {}, bindings: [] })
    }
  }

  get state(): TransportState {
    return {
      open: this.#isOpen(),
      closed: this.#closed,
      blocked: this.#blockedReason !== undefined,
      blockedReason: this.#blockedReason,
    }
  }

  async connect(): Promise<void> {
    if (this.#closed) throw new ClosedError('the in-memory transport was closed')
    this.#connected = true
    this.#reportedOpen = this.#isOpen()
  }

  async declare(declarations: readonly Declaration[]): Promise<void> {
    this.#assertConsumeSide('declare anything')
    // Refused before anything is declared, in the words AmqpTransport uses: RabbitMQ would
    // name an unnamed queue itself, and the engine could never find it again.
    declarations.forEach((declaration, index) => {
      if (declaration.kind === 'queue' && declaration.name === '') {
        throw new ConfigurationError(
          `declarations[${index}].name must not be empty: AceMQ declares named queues`,
        )
      }
    })
    for (const declaration of declarations) {
      switch (declaration.kind) {
        case 'exchange':
          this.#declareExchange(declaration)
          break
        case 'queue':
          this.#declareQueue(declaration)
          break
        case 'binding':
          this.#declareBinding(declaration)
          break
      }
    }
  }

  async publish(message: OutgoingMessage, options: TransportPublishOptions = {}): Promise<void> {
    if (options.signal?.aborted) throw abortError(options.signal)
    if (this.#closed)
      throw new PublishFailedError('the in-memory transport is closed: the message was not sent')
    if (!this.#connected || this.#publishOutages > 0) {
      throw new PublishFailedError(
        'the in-memory transport is disconnected: the message was not sent',
      )
    }
    if (this.#blockedReason !== undefined) {
      if (options.whenBlocked !== 'wait') throw new ConnectionBlockedError(this.#blockedReason)
      await this.#waitForUnblock(options.signal)
      return this.publish(message, options)
    }
    const expiration = message.properties.expiration
    const expirationMs = expiration === undefined ? undefined : Number(expiration)
    if (
      expirationMs !== undefined &&
      !(/^\d+$/.test(expiration as string) && Number.isSafeInteger(expirationMs))
    ) {
      throw new PublishFailedError(
        `the in-memory broker refused the message: PRECONDITION_FAILED - invalid expiration '${String(expiration)}'`,
      )
    }
    // A confirm arrives asynchronously, as it does from a broker.
    await Promise.resolve()
    const targets = this.#route(message.exchange, message.routingKey, message.headers)
    if (targets === undefined) {
      throw new PublishFailedError(
        `the in-memory broker has no exchange '${message.exchange}' (NOT_FOUND): the message was not sent`,
        { code: ErrorCodes.EXCHANGE_NOT_FOUND },
      )
    }
    if (targets.length === 0) {
      if (message.mandatory) throw new UnroutableError(message.exchange, message.routingKey)
      return
    }
    const stored: StoredMessage = {
      body: message.body,
      headers: { ...message.headers },
      properties: { ...message.properties },
      exchange: message.exchange,
      routingKey: message.routingKey,
      persistent: message.persistent,
      redelivered: false,
    }
    for (const queue of targets) this.#enqueue(queue, stored)
  }

  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    this.#assertConsumeSide(`consume from queue '${queue}'`)
    const memoryQueue = this.#queues.get(queue)
    if (memoryQueue === undefined) {
      throw new AceMqError(
        `cannot consume from queue '${queue}': NOT_FOUND - no queue '${queue}' in the in-memory broker`,
        { code: ErrorCodes.NOT_FOUND },
      )
    }
    const subscription: MemorySubscription = {
      queue: memoryQueue,
      prefetch: options.prefetch,
      onDelivery,
      onStatus: options.onStatus,
      unacked: new Set(),
      epoch: 0,
      channelOpen: true,
      cancelled: false,
      closed: false,
    }
    memoryQueue.subscriptions.push(subscription)
    this.#scheduleDispatch()
    return {
      cancel: async () => {
        subscription.cancelled = true
      },
      close: async () => {
        if (subscription.closed) return
        this.#endSubscription(subscription)
      },
    }
  }

  /**
   * Takes the message at the head of `queue` without acknowledging it, as `basic.get` with
   * manual ack does: `ack` removes it, `nack(true)` puts it back, and one left unsettled goes
   * back when the connection drops or closes. `undefined` when the queue is empty.
   */
  async getOne(queue: string): Promise<Delivery | undefined> {
    const memoryQueue = this.#queueToRead(queue, 'get from')
    // An answer arrives asynchronously, as it does from a broker.
    await Promise.resolve()
    const now = Date.now()
    for (;;) {
      const message = this.#takeHead(memoryQueue)
      if (message === undefined) return undefined
      if (message.expiresAt !== undefined && message.expiresAt <= now) {
        this.#deadLetter(memoryQueue, message, 'expired')
        continue
      }
      // Gets are held by a subscription that is never dispatched to (it is cancelled), so a
      // lost or closed channel puts them back like any other unacked delivery.
      let getter = memoryQueue.subscriptions.find((s) => s.onDelivery === this.#got)
      if (getter === undefined) {
        getter = {
          queue: memoryQueue,
          prefetch: 0,
          onDelivery: this.#got,
          onStatus: undefined,
          unacked: new Set(),
          epoch: 0,
          channelOpen: true,
          cancelled: true,
          closed: false,
        }
        memoryQueue.subscriptions.push(getter)
      }
      this.#gotten = undefined
      this.#deliver(memoryQueue, getter, message)
      return this.#gotten
    }
  }

  /** Messages ready in `queue`; rejects when it does not exist. */
  async queueLength(queue: string): Promise<number> {
    return this.#queueToRead(queue, 'count').ready.length
  }

  /** What the get subscription was handed last. */
  #gotten: Delivery | undefined
  readonly #got = (delivery: Delivery): void => {
    this.#gotten = delivery
  }

  #queueToRead(name: string, what: string): MemoryQueue {
    this.#assertConsumeSide(`${what} queue '${name}'`)
    const queue = this.#queues.get(name)
    if (queue === undefined) {
      throw new AceMqError(
        `cannot ${what} queue '${name}': NOT_FOUND - no queue '${name}' in the in-memory broker`,
        { code: ErrorCodes.NOT_FOUND },
      )
    }
    return queue
  }

  onEvent(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    for (const queue of this.#queues.values()) {
      for (const subscription of [...queue.subscriptions]) this.#endSubscription(subscription)
      if (queue.timer !== undefined) clearTimeout(queue.timer)
      queue.timer = undefined
    }
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    for (const handle of this.#reopens) clearImmediate(handle)
    this.#reopens.clear()
    if (this.#dispatch !== undefined) clearImmediate(this.#dispatch)
    this.#dispatch = undefined
    for (const end of [...this.#outageEnds]) end()
    for (const wake of [...this.#unblockWaiters]) wake()
    this.#reportedOpen = false
    this.#emit({ type: 'closed' })
  }

  // --- Test and demo controls -------------------------------------------------------------

  /** Blocks publishing as a broker low on memory would. */
  block(reason = 'low on memory'): void {
    this.#blockedReason = reason
    this.#emit({ type: 'blocked', reason })
  }

  /** Lifts {@link block}. */
  unblock(): void {
    if (this.#blockedReason === undefined) return
    this.#blockedReason = undefined
    for (const wake of [...this.#unblockWaiters]) wake()
    this.#emit({ type: 'unblocked' })
  }

  /**
   * A test and demo control: drops the "connection" as a network failure would, for
   * `outageMs`, then brings it back; resolves once it is back. Like the AMQP transport's two
   * connections, `which` picks the side:
   * - `publish`: publishes fail at once while it is down and a blocked state ends with it;
   *   deliveries and settlements go on.
   * - `consume`: every subscription's channel is lost (unsettled deliveries go back to their
   *   queues and are no longer settleable, `channel-lost` is reported), declarations and new
   *   subscriptions fail; when it is back each subscription reports `consuming` again.
   * - `both` (the default): both at once.
   *
   * `disconnected` is emitted when the first side drops and `reconnected` when both are back.
   * Outages may overlap; each side is down until its last outage ends.
   *
   * @example
   * ```ts
   * await transport.simulateConnectionLoss(50, 'consume')
   * ```
   */
  async simulateConnectionLoss(outageMs = 0, which: SimulatedConnection = 'both'): Promise<void> {
    if (this.#closed) throw new ClosedError('the in-memory transport is closed')
    if (!this.#connected) {
      throw new AceMqError('the in-memory transport is not connected', {
        code: ErrorCodes.NOT_CONNECTED,
      })
    }
    const publishSide = which !== 'consume'
    const consumeSide = which !== 'publish'
    const error = new Error(`simulated connection loss (${which})`)
    if (consumeSide) {
      this.#consumeOutages++
      for (const queue of this.#queues.values()) {
        for (const subscription of [...queue.subscriptions]) {
          if (subscription.channelOpen) this.#loseChannel(subscription, error)
          // A channel already lost and about to come back stays down with the connection.
          else subscription.epoch++
        }
      }
    }
    if (publishSide) this.#publishOutages++
    this.#refreshOpen(error)
    if (publishSide) {
      // A blocked state belongs to the lost connection; the broker tells a new one again.
      if (this.#blockedReason !== undefined) {
        this.#blockedReason = undefined
        this.#emit({ type: 'unblocked' })
      }
      for (const wake of [...this.#unblockWaiters]) wake()
    }
    await new Promise<void>((resolve) => {
      const end = (): void => {
        this.#outageEnds.delete(end)
        resolve()
      }
      this.#outageEnds.add(end)
      this.#later(end, outageMs)
    })
    if (this.#closed) return
    if (publishSide) this.#publishOutages--
    if (consumeSide) this.#consumeOutages--
    this.#refreshOpen(undefined)
    if (consumeSide && this.#consumeOutages === 0) {
      for (const queue of this.#queues.values()) {
        for (const subscription of [...queue.subscriptions]) this.#reopen(subscription)
      }
    }
    this.#scheduleDispatch()
  }

  /**
   * A test and demo control: closes the channel of every subscription on `queue` as a broker
   * channel error would. Their unsettled deliveries go back to the head of the queue in order
   * (on a quorum queue each return counts toward its delivery limit), settling them is dropped,
   * and each subscription reports `channel-lost` with `reason`; a tick later it consumes again
   * on a new channel, as the AMQP transport re-subscribes, and reports `consuming`.
   *
   * @example
   * ```ts
   * transport.closeChannel('orders', 'PRECONDITION_FAILED - unknown delivery tag 7')
   * ```
   */
  closeChannel(queue: string, reason = 'closed by the broker'): void {
    const memoryQueue = this.#queues.get(queue)
    if (memoryQueue === undefined) return
    for (const subscription of [...memoryQueue.subscriptions]) {
      if (subscription.channelOpen) this.#closeChannelOf(subscription, reason)
    }
  }

  /** Whether a queue exists. */
  hasQueue(name: string): boolean {
    return this.#queues.has(name)
  }

  /** Messages ready in a queue (0 when it does not exist). */
  messageCount(name: string): number {
    return this.#queues.get(name)?.ready.length ?? 0
  }

  /** Messages delivered from a queue and not yet settled (0 when it does not exist). */
  unackedCount(name: string): number {
    let count = 0
    for (const subscription of this.#queues.get(name)?.subscriptions ?? []) {
      count += subscription.unacked.size
    }
    return count
  }

  /** The messages ready in a queue, in delivery order, without taking them. */
  peek(name: string): readonly StoredMessage[] {
    return [...(this.#queues.get(name)?.ready ?? [])]
  }

  /** Takes the next ready message from a queue. */
  get(name: string): StoredMessage | undefined {
    const queue = this.#queues.get(name)
    if (queue === undefined) return undefined
    const message = this.#takeHead(queue)
    this.#scheduleExpiry(queue)
    return message
  }

  /** The arguments a queue was declared with, and its type. */
  queueInfo(name: string):
    | {
        readonly type: 'classic' | 'quorum'
        readonly arguments: Readonly<Record<string, HeaderValue>>
      }
    | undefined {
    const queue = this.#queues.get(name)
    return queue && { type: queue.type, arguments: queue.arguments }
  }

  /** Deletes a queue, its bindings and its messages; its consumers are cancelled. */
  deleteQueue(name: string): void {
    const queue = this.#queues.get(name)
    if (queue === undefined) return
    if (queue.timer) clearTimeout(queue.timer)
    queue.timer = undefined
    for (const subscription of queue.subscriptions) subscription.cancelled = true
    this.#queues.delete(name)
    for (const exchange of this.#exchanges.values()) {
      for (let i = exchange.bindings.length - 1; i >= 0; i--) {
        if (exchange.bindings[i]?.queue === name) exchange.bindings.splice(i, 1)
      }
    }
  }

  // --- Connection --------------------------------------------------------------------------

  #isOpen(): boolean {
    return (
      this.#connected && !this.#closed && this.#publishOutages === 0 && this.#consumeOutages === 0
    )
  }

  #refreshOpen(error: Error | undefined): void {
    const open = this.#isOpen()
    if (this.#reportedOpen && !open) {
      this.#reportedOpen = false
      this.#emit({ type: 'disconnected', error })
    } else if (!this.#reportedOpen && open) {
      this.#reportedOpen = true
      this.#emit({ type: 'reconnected' })
    }
  }

  #assertConsumeSide(what: string): void {
    if (this.#closed) throw new ClosedError(`the in-memory transport is closed: cannot ${what}`)
    if (!this.#connected) {
      throw new AceMqError(`the in-memory transport is not connected: cannot ${what}`, {
        code: ErrorCodes.NOT_CONNECTED,
      })
    }
    if (this.#consumeOutages > 0) {
      throw new AceMqError(`the in-memory transport is disconnected: cannot ${what}`, {
        code: ErrorCodes.CONNECTION_DOWN,
      })
    }
  }

  #emit(event: TransportEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event)
      } catch {
        // A listener's failure is its own; the transport keeps going.
      }
    }
  }

  #waitForUnblock(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const wake = (): void => {
        this.#unblockWaiters.delete(wake)
        signal?.removeEventListener('abort', onAbort)
        if (this.#closed)
          reject(new PublishFailedError('the in-memory transport closed while the publish waited'))
        else resolve()
      }
      const onAbort = (): void => {
        this.#unblockWaiters.delete(wake)
        reject(abortError(signal))
      }
      this.#unblockWaiters.add(wake)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** A timer that never keeps the process alive and that {@link close} clears. */
  #later(work: () => void, ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      work()
    }, ms)
    timer.unref?.()
    this.#timers.add(timer)
    return timer
  }

  #cancelTimer(timer: ReturnType<typeof setTimeout> | undefined): void {
    if (timer === undefined) return
    clearTimeout(timer)
    this.#timers.delete(timer)
  }

  // --- Declarations ------------------------------------------------------------------------

  #declareExchange(declaration: Extract<Declaration, { kind: 'exchange' }>): void {
    // The default exchange always exists; like the AMQP transport, declaring it does nothing.
    if (declaration.name === '') return
    const existing = this.#exchanges.get(declaration.name)
    if (existing === undefined) {
      if (declaration.name.startsWith('amq.')) {
        throw refused(
          declaration,
          `ACCESS_REFUSED - exchange name '${declaration.name}' contains reserved prefix 'amq.*'`,
        )
      }
      this.#exchanges.set(declaration.name, {
        name: declaration.name,
        type: declaration.type,
        durable: declaration.durable,
        arguments: declaration.arguments,
        bindings: [],
      })
      return
    }
    const inequivalent = (what: string): AceMqError =>
      refused(
        declaration,
        `PRECONDITION_FAILED - inequivalent arg '${what}' for exchange '${declaration.name}'`,
      )
    if (existing.type !== declaration.type) throw inequivalent('type')
    if (existing.durable !== declaration.durable) throw inequivalent('durable')
    const key = 'alternate-exchange'
    if (!equivalentArgument(existing.arguments[key], declaration.arguments[key])) {
      throw inequivalent(key)
    }
  }

  #declareQueue(declaration: Extract<Declaration, { kind: 'queue' }>): void {
    const args = declaration.arguments
    const queueType: unknown = args['x-queue-type']
    if (queueType !== undefined && !(declaration.type === 'quorum' && queueType === 'quorum')) {
      throw new ConfigurationError(
        `queue '${declaration.name}': arguments must not set x-queue-type for a ${declaration.type} queue: the declaration's type decides it`,
      )
    }
    const invalid = (what: string, why: string): AceMqError =>
      refused(
        declaration,
        `PRECONDITION_FAILED - invalid arg '${what}' for queue '${declaration.name}': ${why}`,
      )
    const ttl = nonNegativeArgument(args, 'x-message-ttl', invalid)
    const consumerTimeout = nonNegativeArgument(args, 'x-consumer-timeout', invalid)
    const limitArgument = args['x-delivery-limit']
    const limit = limitArgument === undefined ? undefined : wholeNumber(limitArgument)
    if (declaration.type === 'quorum' && limitArgument !== undefined && limit === undefined) {
      throw invalid('x-delivery-limit', 'unacceptable type')
    }
    if (args['x-dead-letter-routing-key'] !== undefined) {
      if (args['x-dead-letter-exchange'] === undefined) {
        throw invalid('x-dead-letter-routing-key', 'routing_key_but_no_dlx_defined')
      }
    }
    for (const key of ['x-dead-letter-exchange', 'x-dead-letter-routing-key'] as const) {
      const value = args[key]
      if (value !== undefined && typeof value !== 'string') throw invalid(key, 'unacceptable type')
    }
    if (declaration.type === 'quorum' && !declaration.durable) {
      throw refused(
        declaration,
        `PRECONDITION_FAILED - invalid property 'non-durable' for queue '${declaration.name}'`,
      )
    }
    const existing = this.#queues.get(declaration.name)
    if (existing !== undefined) {
      const inequivalent = (what: string): AceMqError =>
        refused(
          declaration,
          `PRECONDITION_FAILED - inequivalent arg '${what}' for queue '${declaration.name}'`,
        )
      if (existing.durable !== declaration.durable) throw inequivalent('durable')
      if (existing.type !== declaration.type) throw inequivalent('x-queue-type')
      for (const key of COMPARED_QUEUE_ARGUMENTS) {
        if (!equivalentArgument(existing.arguments[key], args[key])) throw inequivalent(key)
      }
      return
    }
    this.#queues.set(declaration.name, {
      name: declaration.name,
      type: declaration.type,
      durable: declaration.durable,
      arguments: args,
      ttlMs: ttl,
      deliveryLimit:
        declaration.type !== 'quorum'
          ? undefined
          : limit === undefined
            ? DEFAULT_QUORUM_DELIVERY_LIMIT
            : limit < 0
              ? undefined
              : limit,
      consumerTimeoutMs: consumerTimeout ?? this.#consumerTimeoutMs,
      ready: [],
      returned: 0,
      subscriptions: [],
      next: 0,
      nextSeq: 0,
      timer: undefined,
      timerDue: Infinity,
    })
  }

  #declareBinding(declaration: Extract<Declaration, { kind: 'binding' }>): void {
    if (declaration.exchange === '') {
      throw refused(declaration, 'ACCESS_REFUSED - operation not permitted on the default exchange')
    }
    const exchange = this.#exchanges.get(declaration.exchange)
    if (exchange === undefined) {
      throw refused(declaration, `NOT_FOUND - no exchange '${declaration.exchange}'`)
    }
    if (!this.#queues.has(declaration.queue)) {
      throw refused(declaration, `NOT_FOUND - no queue '${declaration.queue}'`)
    }
    const table = argumentTable(declaration.arguments)
    let match: HeadersMatch | undefined
    if (exchange.type === 'headers') {
      const mode = xMatchMode(declaration.arguments['x-match'])
      if (typeof mode !== 'string') throw refused(declaration, mode.error)
      match = { mode, table }
    }
    const identity = `${declaration.routingKey}\u0000${canonical({ t: 'table', v: table })}`
    const duplicate = exchange.bindings.some(
      (b) => b.queue === declaration.queue && b.identity === identity,
    )
    if (!duplicate) {
      exchange.bindings.push({
        queue: declaration.queue,
        routingKey: declaration.routingKey,
        identity,
        match,
      })
    }
  }

  // --- Routing and queues ------------------------------------------------------------------

  /** The queues a message goes to; undefined when the exchange does not exist. */
  #route(exchangeName: string, routingKey: string, headers: Headers): MemoryQueue[] | undefined {
    if (exchangeName === '') {
      const queue = this.#queues.get(routingKey)
      return queue === undefined ? [] : [queue]
    }
    let exchange = this.#exchanges.get(exchangeName)
    if (exchange === undefined) return undefined
    let data: Map<string, Wire> | undefined
    const names = new Set<string>()
    const visited = new Set<string>()
    while (exchange !== undefined && !visited.has(exchange.name)) {
      visited.add(exchange.name)
      for (const binding of exchange.bindings) {
        if (names.has(binding.queue)) continue
        let matched: boolean
        switch (exchange.type) {
          case 'direct':
            matched = binding.routingKey === routingKey
            break
          case 'fanout':
            matched = true
            break
          case 'topic':
            matched = topicMatches(binding.routingKey.split('.'), routingKey.split('.'))
            break
          case 'headers':
            data ??= headerTable(headers)
            matched = binding.match !== undefined && headersMatch(binding.match, data)
            break
        }
        if (matched) names.add(binding.queue)
      }
      if (names.size > 0) break
      // Nothing bound took it: an alternate exchange, when there is one, gets the chance.
      const alternate: unknown = exchange.arguments['alternate-exchange']
      exchange = typeof alternate === 'string' ? this.#exchanges.get(alternate) : undefined
    }
    return [...names].flatMap((name) => {
      const queue = this.#queues.get(name)
      return queue === undefined ? [] : [queue]
    })
  }

  #enqueue(queue: MemoryQueue, message: StoredMessage): void {
    const now = Date.now()
    const expiration = message.properties.expiration
    const ttls = [queue.ttlMs, expiration === undefined ? undefined : Number(expiration)].filter(
      (ttl): ttl is number => ttl !== undefined,
    )
    const expiresAt = ttls.length === 0 ? undefined : now + Math.min(...ttls)
    queue.ready.push({
      ...message,
      redelivered: false,
      seq: queue.nextSeq++,
      expiresAt,
      returns: 0,
    })
    if (queue.ready.length === 1) this.#scheduleExpiry(queue)
    this.#scheduleDispatch()
  }

  #takeHead(queue: MemoryQueue): QueuedMessage | undefined {
    const message = queue.ready.shift()
    if (message !== undefined && queue.returned > 0) queue.returned--
    return message
  }

  /**
   * Puts a delivered message back, as the broker does on a nack with requeue (`nack`) or when
   * the channel it went out on closes (`channel`). A classic queue puts it back in its place; a
   * quorum queue counts the return, then drops or dead-letters it past the delivery limit, or
   * returns it to the head after the messages returned before it (RabbitMQ 3.x, with no limit,
   * sends a nacked message to the back).
   */
  #putBack(queue: MemoryQueue, message: QueuedMessage, how: 'nack' | 'channel'): void {
    if (this.#queues.get(queue.name) !== queue) return
    if (queue.type === 'quorum') {
      const returned: QueuedMessage = {
        ...message,
        redelivered: true,
        returns: message.returns + 1,
      }
      if (queue.deliveryLimit !== undefined && returned.returns > queue.deliveryLimit) {
        this.#deadLetter(queue, returned, 'delivery_limit')
      } else if (queue.deliveryLimit === undefined && how === 'nack') {
        queue.ready.push(returned)
      } else {
        queue.ready.splice(queue.returned, 0, returned)
        queue.returned++
      }
    } else {
      let index = 0
      while (index < queue.ready.length && (queue.ready[index]?.seq ?? 0) < message.seq) index++
      queue.ready.splice(index, 0, { ...message, redelivered: true })
    }
    this.#scheduleExpiry(queue)
    this.#scheduleDispatch()
  }

  /** Arms the queue's timer for its head, the only message RabbitMQ expires. */
  #scheduleExpiry(queue: MemoryQueue): void {
    const due = queue.ready[0]?.expiresAt ?? Infinity
    if (due === queue.timerDue && queue.timer !== undefined) return
    if (queue.timer !== undefined) this.#cancelTimer(queue.timer)
    queue.timer = undefined
    queue.timerDue = due
    if (due === Infinity || this.#closed) return
    queue.timer = this.#later(
      () => {
        queue.timer = undefined
        queue.timerDue = Infinity
        this.#expire(queue)
      },
      // setTimeout fires at once past 2^31−1 ms: a longer TTL (a rung of weeks) is waited out
      // in steps, #expire expiring nothing until the head's time has come.
      Math.min(Math.max(0, due - Date.now()), MAX_TIMER_MS),
    )
  }

  /** Like RabbitMQ, expires messages from the head of the queue and dead-letters them. */
  #expire(queue: MemoryQueue): void {
    if (this.#queues.get(queue.name) !== queue) return
    const now = Date.now()
    while ((queue.ready[0]?.expiresAt ?? Infinity) <= now) {
      this.#deadLetter(queue, this.#takeHead(queue) as QueuedMessage, 'expired')
    }
    this.#scheduleExpiry(queue)
  }

  /**
   * Dead-letters as RabbitMQ 3.10 does: to the queue's `x-dead-letter-exchange` (dropped
   * without one) with its `x-dead-letter-routing-key` or the message's own; `x-death` gets an
   * entry per queue and reason, counted and moved to the front when it dies there again;
   * `x-first-death-*` are set once; a per-message `expiration` moves into the entry as
   * `original-expiration`. A message that would go round a cycle of queues with no rejection
   * in it is dropped for the queues of that cycle.
   */
  #deadLetter(queue: MemoryQueue, message: QueuedMessage, reason: DeathReason): void {
    const exchange = queue.arguments['x-dead-letter-exchange']
    if (typeof exchange !== 'string') return
    const routingKeyArgument = queue.arguments['x-dead-letter-routing-key']
    const routingKey =
      typeof routingKeyArgument === 'string' ? routingKeyArgument : message.routingKey
    const { expiration, ...properties } = message.properties
    const previous = message.headers['x-death']
    const deaths: HeaderValue[] = Array.isArray(previous) ? [...(previous as HeaderValue[])] : []
    const index = deaths.findIndex((death) => isTable(death) && deathOf(death, queue.name, reason))
    let entry: Record<string, HeaderValue>
    if (index >= 0) {
      const found = deaths.splice(index, 1)[0] as Record<string, HeaderValue>
      entry = { ...found, count: { '!': 'long', value: (headerInteger(found['count']) ?? 0) + 1 } }
    } else {
      entry = {
        count: { '!': 'long', value: 1 },
        reason,
        queue: queue.name,
        time: { '!': 'timestamp', value: Math.floor(Date.now() / 1000) },
        exchange: message.exchange,
        'routing-keys': [message.routingKey],
        ...(expiration === undefined ? {} : { 'original-expiration': expiration }),
      }
    }
    deaths.unshift(entry)
    const headers: Headers = { ...message.headers, 'x-death': deaths }
    if (message.headers['x-first-death-reason'] === undefined) {
      headers['x-first-death-reason'] = reason
      headers['x-first-death-queue'] = queue.name
      headers['x-first-death-exchange'] = message.exchange
    }
    const copy: StoredMessage = {
      body: message.body,
      headers,
      properties,
      exchange,
      routingKey,
      persistent: message.persistent,
      redelivered: false,
    }
    for (const target of this.#route(exchange, routingKey, headers) ?? []) {
      if (reason !== 'rejected' && isCycle(target.name, deaths)) continue
      this.#enqueue(target, copy)
    }
  }

  // --- Subscriptions -----------------------------------------------------------------------

  #status(subscription: MemorySubscription, status: SubscriptionStatus): void {
    try {
      subscription.onStatus?.(status)
    } catch {
      // onStatus must not throw; if it does, the transport keeps going.
    }
  }

  /**
   * The subscription's channel is gone: a new epoch voids every delivery made on it, and
   * those not yet settled go back to the queue in delivery order.
   */
  #dropChannel(subscription: MemorySubscription): void {
    subscription.epoch++
    subscription.channelOpen = false
    const pending = [...subscription.unacked]
    subscription.unacked.clear()
    for (const delivery of pending) this.#cancelTimer(delivery.timer)
    for (const delivery of pending) {
      this.#putBack(subscription.queue, delivery.message, 'channel')
    }
  }

  #loseChannel(subscription: MemorySubscription, error: Error | undefined): void {
    this.#dropChannel(subscription)
    this.#status(subscription, { type: 'channel-lost', error })
  }

  /** A broker channel error: the channel closes, and a tick later the subscription is back. */
  #closeChannelOf(subscription: MemorySubscription, reason: string): void {
    this.#loseChannel(
      subscription,
      new AceMqError(
        `the in-memory broker closed the channel of the consumer on queue '${subscription.queue.name}': ${reason}`,
        { code: ErrorCodes.CHANNEL_CLOSED },
      ),
    )
    const epoch = subscription.epoch
    const handle = setImmediate(() => {
      this.#reopens.delete(handle)
      if (subscription.epoch === epoch && this.#consumeOutages === 0) this.#reopen(subscription)
    })
    this.#reopens.add(handle)
  }

  /** A new channel for a subscription whose channel was lost. */
  #reopen(subscription: MemorySubscription): void {
    if (subscription.closed || subscription.channelOpen || this.#closed) return
    subscription.channelOpen = true
    // A cancelled subscription is not consuming: the AMQP transport does not re-subscribe it.
    if (!subscription.cancelled) this.#status(subscription, { type: 'consuming' })
    this.#scheduleDispatch()
  }

  #endSubscription(subscription: MemorySubscription): void {
    subscription.cancelled = true
    subscription.closed = true
    this.#dropChannel(subscription)
    const subscriptions = subscription.queue.subscriptions
    const index = subscriptions.indexOf(subscription)
    if (index >= 0) subscriptions.splice(index, 1)
  }

  #scheduleDispatch(): void {
    if (this.#dispatch !== undefined || this.#closed) return
    this.#dispatch = setImmediate(() => {
      this.#dispatch = undefined
      this.#deliverReady()
    })
  }

  #deliverReady(): void {
    if (this.#closed || !this.#connected || this.#consumeOutages > 0) return
    for (const queue of this.#queues.values()) {
      const now = Date.now()
      // Only what was ready when this turn began: a message a consumer requeues at once waits
      // for the next turn, as it would wait for the network, instead of looping here.
      let budget = queue.ready.length
      while (queue.ready.length > 0) {
        if (budget-- === 0) {
          this.#scheduleDispatch()
          break
        }
        const subscription = this.#nextSubscription(queue)
        if (subscription === undefined) break
        const message = this.#takeHead(queue) as QueuedMessage
        if (message.expiresAt !== undefined && message.expiresAt <= now) {
          this.#deadLetter(queue, message, 'expired')
          continue
        }
        this.#deliver(queue, subscription, message)
      }
      this.#scheduleExpiry(queue)
    }
  }

  #nextSubscription(queue: MemoryQueue): MemorySubscription | undefined {
    const count = queue.subscriptions.length
    for (let i = 0; i < count; i++) {
      const index = (queue.next + i) % count
      const subscription = queue.subscriptions[index]
      if (
        subscription &&
        !subscription.cancelled &&
        subscription.channelOpen &&
        (subscription.prefetch === 0 || subscription.unacked.size < subscription.prefetch)
      ) {
        queue.next = (index + 1) % count
        return subscription
      }
    }
    return undefined
  }

  #deliver(queue: MemoryQueue, subscription: MemorySubscription, message: QueuedMessage): void {
    const flight: InFlightDelivery = {
      message,
      subscription,
      epoch: subscription.epoch,
      settled: false,
      timer: undefined,
    }
    subscription.unacked.add(flight)
    const timeout = queue.consumerTimeoutMs
    if (timeout !== undefined) {
      flight.timer = this.#later(() => {
        flight.timer = undefined
        if (!flight.settled && flight.epoch === subscription.epoch && subscription.channelOpen) {
          this.#closeChannelOf(
            subscription,
            `PRECONDITION_FAILED - delivery acknowledgement timed out (timeout value used: ${timeout} ms)`,
          )
        }
      }, timeout)
    }
    // A quorum queue tells a redelivery how many times the message came back (a 64-bit long).
    const wireHeaders =
      queue.type === 'quorum' && message.returns > 0
        ? { ...message.headers, 'x-delivery-count': { '!': 'long', value: message.returns } }
        : message.headers
    const settleable = (): boolean => !flight.settled && flight.epoch === subscription.epoch
    const settle = (): boolean => {
      if (!settleable()) return false
      flight.settled = true
      this.#cancelTimer(flight.timer)
      subscription.unacked.delete(flight)
      this.#scheduleDispatch()
      return true
    }
    const delivery: Delivery = {
      body: message.body,
      headers: asDecoded(wireHeaders),
      wireHeaders,
      properties: message.properties,
      exchange: message.exchange,
      routingKey: message.routingKey,
      redelivered: message.redelivered,
      get settleable() {
        return settleable()
      },
      ack: () => settle(),
      nack: (requeue: boolean) => {
        if (!settle()) return false
        if (requeue) this.#putBack(queue, message, 'nack')
        else if (this.#queues.get(queue.name) === queue) {
          this.#deadLetter(queue, message, 'rejected')
        }
        return true
      },
    }
    subscription.onDelivery(delivery)
  }
}

function refused(declaration: Declaration, reply: string): AceMqError {
  const what =
    declaration.kind === 'binding'
      ? `the binding of queue '${declaration.queue}' to exchange '${declaration.exchange}' with routing key '${declaration.routingKey}'`
      : `${declaration.kind} '${declaration.name}'`
  return new AceMqError(`the in-memory broker refused to declare ${what}: ${reply}`, {
    code: ErrorCodes.DECLARATION_FAILED,
  })
}

/** An integer of any notation, or undefined. */
function wholeNumber(value: unknown): number | undefined {
  const wire = toWire(value)
  return wire.t === 'int' ? wire.v : undefined
}

function nonNegativeArgument(
  args: Readonly<Record<string, HeaderValue>>,
  key: string,
  invalid: (what: string, why: string) => AceMqError,
): number | undefined {
  const value = args[key]
  if (value === undefined) return undefined
  const n = wholeNumber(value)
  if (n === undefined) throw invalid(key, 'unacceptable type')
  if (n < 0) throw invalid(key, `{value_negative,${n}}`)
  return n
}

function isTable(value: unknown): value is Record<string, HeaderValue> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array) &&
    !Object.hasOwn(value, '!')
  )
}

function deathOf(death: Record<string, HeaderValue>, queue: string, reason: string): boolean {
  return headerString(death['queue']) === queue && headerString(death['reason']) === reason
}

/**
 * RabbitMQ's cycle check: going to `queue`, the message has died there before, and every death
 * since (that one included) was automatic (not `rejected`).
 */
function isCycle(queue: string, deaths: readonly HeaderValue[]): boolean {
  for (const death of deaths) {
    // Something other than a table was put there by a client: not a fully automatic cycle.
    if (!isTable(death)) return false
    if (headerString(death['reason']) === 'rejected') return false
    if (headerString(death['queue']) === queue) return true
  }
  return false
}

function topicMatches(pattern: readonly string[], words: readonly string[]): boolean {
  if (pattern.length === 0) return words.length === 0
  const [head, ...rest] = pattern
  if (head === '#') {
    for (let i = 0; i <= words.length; i++) if (topicMatches(rest, words.slice(i))) return true
    return false
  }
  if (words.length === 0) return false
  return (head === '*' || head === words[0]) && topicMatches(rest, words.slice(1))
}

// --- AMQP field values, as RabbitMQ sees them ------------------------------------------------

/**
 * A header or argument value as it reaches the broker: its AMQP type and value. Integers carry
 * the width amqplib writes them with (a plain number gets the smallest that fits), strings and
 * byte arrays both hold bytes (RabbitMQ compares their bytes), tables are sorted by key.
 */
type Wire =
  | { readonly t: 'void' }
  | { readonly t: 'bool'; readonly v: boolean }
  | { readonly t: 'int'; readonly w: string; readonly v: number }
  | { readonly t: 'float'; readonly w: 'float' | 'double'; readonly v: number }
  | { readonly t: 'timestamp'; readonly v: number }
  | { readonly t: 'decimal'; readonly v: string }
  | { readonly t: 'bytes'; readonly w: 'longstr' | 'binary'; readonly v: string }
  | { readonly t: 'array'; readonly v: readonly Wire[] }
  | { readonly t: 'table'; readonly v: readonly (readonly [string, Wire])[] }
  | { readonly t: 'other'; readonly v: string }

const INTEGER_WIDTHS: Readonly<Record<string, string>> = {
  byte: 'byte',
  int8: 'byte',
  unsignedbyte: 'unsignedbyte',
  uint8: 'unsignedbyte',
  short: 'short',
  int16: 'short',
  unsignedshort: 'unsignedshort',
  uint16: 'unsignedshort',
  int: 'signedint',
  int32: 'signedint',
  unsignedint: 'unsignedint',
  uint32: 'unsignedint',
  long: 'long',
  int64: 'long',
}

const utf8 = new TextEncoder()

function hex(bytes: Uint8Array): string {
  let out = ''
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0')
  return out
}

/** amqplib's own rule for a plain number: floating point, or an integer of the smallest width. */
function numberWire(n: number): Wire {
  const floating = n >= 0x8000000000000000 || (Math.abs(n) < 0x4000000000000 && Math.floor(n) !== n)
  if (floating || !Number.isFinite(n)) return { t: 'float', w: 'double', v: n }
  const w =
    n >= -128 && n < 128
      ? 'byte'
      : n >= -0x8000 && n < 0x8000
        ? 'short'
        : n >= -0x80000000 && n < 0x80000000
          ? 'signedint'
          : 'long'
  return { t: 'int', w, v: n }
}

function toWire(value: unknown): Wire {
  switch (typeof value) {
    case 'undefined':
      return { t: 'void' }
    case 'boolean':
      return { t: 'bool', v: value }
    case 'number':
      return numberWire(value)
    case 'bigint':
      return { t: 'int', w: 'long', v: Number(value) }
    case 'string':
      return { t: 'bytes', w: 'longstr', v: hex(utf8.encode(value)) }
    case 'object': {
      if (value === null) return { t: 'void' }
      if (value instanceof Uint8Array) return { t: 'bytes', w: 'binary', v: hex(value) }
      if (Array.isArray(value)) return { t: 'array', v: value.map(toWire) }
      if (Object.hasOwn(value, '!')) {
        const typed = value as { readonly '!': unknown; readonly value: unknown }
        const type = String(typed['!'])
        const inner = typed.value
        const width = INTEGER_WIDTHS[type]
        if (width !== undefined) return { t: 'int', w: width, v: Number(inner) }
        if (type === 'double' || type === 'float64')
          return { t: 'float', w: 'double', v: Number(inner) }
        if (type === 'float') return { t: 'float', w: 'float', v: Math.fround(Number(inner)) }
        if (type === 'timestamp') return { t: 'timestamp', v: Number(inner) }
        if (type === 'decimal') return { t: 'decimal', v: JSON.stringify(inner) }
        if (type === 'string') return toWire(String(inner))
        if (type === 'boolean') return { t: 'bool', v: Boolean(inner) }
        return { t: 'other', v: JSON.stringify(value) }
      }
      return { t: 'table', v: argumentTable(value as Record<string, unknown>, false) }
    }
    default:
      return { t: 'other', v: String(value) }
  }
}

/**
 * A table of arguments or headers as wire values, sorted by key, undefined values left out.
 * `asDeclared`: the top level of declaration arguments, where the AMQP transport writes every
 * safe integer as a 64-bit long.
 */
function argumentTable(
  args: Readonly<Record<string, unknown>>,
  asDeclared = true,
): (readonly [string, Wire])[] {
  return Object.keys(args)
    .filter((key) => args[key] !== undefined)
    .sort()
    .map((key) => {
      const value = args[key]
      const wire =
        asDeclared && typeof value === 'number' && Number.isSafeInteger(value)
          ? ({ t: 'int', w: 'long', v: value } as const)
          : toWire(value)
      return [key, wire] as const
    })
}

function headerTable(headers: Headers): Map<string, Wire> {
  return new Map(argumentTable(headers ?? {}, false))
}

/** A string that is equal for values RabbitMQ holds as the same term (type included). */
function canonical(wire: Wire): string {
  switch (wire.t) {
    case 'array':
      return `A[${wire.v.map(canonical).join(',')}]`
    case 'table':
      return `F{${wire.v.map(([key, value]) => `${JSON.stringify(key)}:${canonical(value)}`).join(',')}}`
    case 'void':
      return 'V'
    case 'int':
    case 'float':
    case 'bytes':
      return `${wire.w}:${String(wire.v)}`
    default:
      return `${wire.t}:${String(wire.v)}`
  }
}

const numeric = (wire: Wire): wire is Extract<Wire, { v: number }> =>
  wire.t === 'int' || wire.t === 'float' || wire.t === 'timestamp'

/** Erlang's `==` on two field values: numbers compare across types, bytes by their bytes. */
function looselyEqual(a: Wire, b: Wire): boolean {
  if (numeric(a) && numeric(b)) return a.v === b.v
  if (a.t === 'bytes' && b.t === 'bytes') return a.v === b.v
  if (a.t === 'array' && b.t === 'array') {
    return a.v.length === b.v.length && a.v.every((item, i) => sameTyped(item, b.v[i] as Wire))
  }
  if (a.t === 'table' && b.t === 'table') {
    return (
      a.v.length === b.v.length &&
      a.v.every(([key, item], i) => {
        const other = b.v[i] as readonly [string, Wire]
        return key === other[0] && sameTyped(item, other[1])
      })
    )
  }
  return canonical(a) === canonical(b)
}

/** Inside arrays and tables RabbitMQ keeps `{type, value}`: the types must be the same too. */
function sameTyped(a: Wire, b: Wire): boolean {
  const typeOf = (wire: Wire): string => ('w' in wire ? wire.w : wire.t)
  return typeOf(a) === typeOf(b) && looselyEqual(a, b)
}

/**
 * Whether two arguments are equivalent to RabbitMQ on a re-declaration: integers of any width
 * with the same value, strings and bytes with the same bytes, or the same value otherwise.
 */
function equivalentArgument(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b
  const [left, right] = [toWire(a), toWire(b)]
  if (left.t === 'int' && right.t === 'int') return left.v === right.v
  if (left.t === 'bytes' && right.t === 'bytes') return left.v === right.v
  return canonical(left) === canonical(right)
}

type XMatch = 'all' | 'any' | 'all-with-x' | 'any-with-x'

interface HeadersMatch {
  readonly mode: XMatch
  readonly table: readonly (readonly [string, Wire])[]
}

/** A headers binding's `x-match`, validated as RabbitMQ validates it. */
function xMatchMode(value: unknown): XMatch | { readonly error: string } {
  if (value === undefined) return 'all'
  if (typeof value !== 'string') {
    const wire = toWire(value)
    return {
      error: `PRECONDITION_FAILED - Invalid x-match field type ${'w' in wire ? wire.w : wire.t}; expected longstr`,
    }
  }
  if (value === 'all' || value === 'any' || value === 'all-with-x' || value === 'any-with-x') {
    return value
  }
  return {
    error: `PRECONDITION_FAILED - Invalid x-match field value '${value}'; expected all, any, all-with-x, or any-with-x`,
  }
}

/**
 * RabbitMQ's headers match: `all` needs every binding header present with an equal value, `any`
 * one; a binding header with no value (`null`) only needs to be present. `all` and `any` skip
 * binding headers that start with `x-`; `all-with-x` and `any-with-x` match them too (only
 * `x-match` itself is skipped). An `all` binding with nothing to match takes every message.
 */
function headersMatch(binding: HeadersMatch, data: ReadonlyMap<string, Wire>): boolean {
  const withX = binding.mode === 'all-with-x' || binding.mode === 'any-with-x'
  const all = binding.mode === 'all' || binding.mode === 'all-with-x'
  let allMatch = true
  let anyMatch = false
  for (const [key, pattern] of binding.table) {
    if (key === 'x-match' || (!withX && key.startsWith('x-'))) continue
    const value = data.get(key)
    if (value !== undefined && (pattern.t === 'void' || looselyEqual(pattern, value))) {
      anyMatch = true
    } else {
      allMatch = false
    }
  }
  return all ? allMatch : anyMatch
}

/**
 * Headers as a consumer reads them through amqplib, which decodes every integer and float to a
 * number (timestamps and decimals keep their notation) and drops undefined values. The same
 * object when nothing changes.
 */
function asDecoded(headers: Headers): Headers {
  let copy: Record<string, unknown> | undefined
  for (const key of Object.keys(headers)) {
    const value = headers[key]
    const decoded = decodedValue(value)
    if (decoded !== value) {
      copy ??= { ...headers }
      if (decoded === undefined) delete copy[key]
      else copy[key] = decoded
    }
  }
  return copy ?? headers
}

function decodedValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return value
  if (Array.isArray(value)) {
    let changed = false
    const items = value.map((item) => {
      const decoded = decodedValue(item)
      if (decoded !== item) changed = true
      return decoded
    })
    return changed ? items : value
  }
  if (Object.hasOwn(value, '!')) {
    const wire = toWire(value)
    if (wire.t === 'int' || wire.t === 'float') return wire.v
    if (wire.t === 'bytes') return (value as { value: unknown }).value
    if (wire.t === 'bool') return wire.v
    return value
  }
  return asDecoded(value as Headers)
}
