import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  PublishFailedError,
  UnroutableError,
  abortError,
} from '../../errors.js'
import { ErrorCodes } from '../../error-codes.js'
import type {
  Declaration,
  Delivery,
  HeaderValue,
  OutgoingMessage,
  Transport,
  TransportConsumeOptions,
  TransportEvent,
  TransportPublishOptions,
  TransportState,
  TransportSubscription,
} from '../transport.js'
import type { MemoryQueue, MemorySubscription, StoredMessage } from './broker-model.js'
import { MemoryBroker, type BrokerLink } from './memory-broker.js'

export type { StoredMessage } from './broker-model.js'
export { DEFAULT_QUORUM_DELIVERY_LIMIT } from './queue-arguments.js'

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

  readonly #broker: MemoryBroker
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  readonly #unblockWaiters = new Set<() => void>()
  readonly #outageEnds = new Set<() => void>()
  #connected = false
  #closed = false
  #publishOutages = 0
  #consumeOutages = 0
  #reportedOpen = false
  #blockedReason: string | undefined

  constructor(options: InMemoryTransportOptions = {}) {
    const timeout = options.consumerTimeoutMs
    if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) {
      throw new ConfigurationError(
        `consumerTimeoutMs must be a positive number of milliseconds; got ${String(timeout)}`,
      )
    }
    // The broker asks the connection's state as it is at each turn.
    const link: BrokerLink = {
      isClosed: () => this.#closed,
      isConnected: () => this.#connected,
      isConsumeDown: () => this.#consumeOutages > 0,
    }
    this.#broker = new MemoryBroker(link, timeout)
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
    for (const declaration of declarations) this.#broker.declare(declaration)
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
    const targets = this.#broker.route(message.exchange, message.routingKey, message.headers)
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
    for (const queue of targets) this.#broker.enqueue(queue, stored)
  }

  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    this.#assertConsumeSide(`consume from queue '${queue}'`)
    const memoryQueue = this.#broker.queues.get(queue)
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
    this.#broker.scheduleDispatch()
    return {
      cancel: async () => {
        subscription.cancelled = true
      },
      close: async () => {
        if (subscription.closed) return
        this.#broker.endSubscription(subscription)
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
    return this.#broker.getOne(memoryQueue)
  }

  /** Messages ready in `queue`; rejects when it does not exist. */
  async queueLength(queue: string): Promise<number> {
    return this.#queueToRead(queue, 'count').ready.length
  }

  #queueToRead(name: string, what: string): MemoryQueue {
    this.#assertConsumeSide(`${what} queue '${name}'`)
    const queue = this.#broker.queues.get(name)
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
    for (const queue of this.#broker.queues.values()) {
      for (const subscription of [...queue.subscriptions])
        this.#broker.endSubscription(subscription)
    }
    this.#broker.stop()
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
      for (const queue of this.#broker.queues.values()) {
        for (const subscription of [...queue.subscriptions]) {
          if (subscription.channelOpen) this.#broker.loseChannel(subscription, error)
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
      this.#broker.later(end, outageMs)
    })
    if (this.#closed) return
    if (publishSide) this.#publishOutages--
    if (consumeSide) this.#consumeOutages--
    this.#refreshOpen(undefined)
    if (consumeSide && this.#consumeOutages === 0) {
      for (const queue of this.#broker.queues.values()) {
        for (const subscription of [...queue.subscriptions]) this.#broker.reopen(subscription)
      }
    }
    this.#broker.scheduleDispatch()
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
    const memoryQueue = this.#broker.queues.get(queue)
    if (memoryQueue === undefined) return
    for (const subscription of [...memoryQueue.subscriptions]) {
      if (subscription.channelOpen) this.#broker.closeChannelOf(subscription, reason)
    }
  }

  /** Whether a queue exists. */
  hasQueue(name: string): boolean {
    return this.#broker.queues.has(name)
  }

  /** Messages ready in a queue (0 when it does not exist). */
  messageCount(name: string): number {
    return this.#broker.queues.get(name)?.ready.length ?? 0
  }

  /** Messages delivered from a queue and not yet settled (0 when it does not exist). */
  unackedCount(name: string): number {
    let count = 0
    for (const subscription of this.#broker.queues.get(name)?.subscriptions ?? []) {
      count += subscription.unacked.size
    }
    return count
  }

  /** The messages ready in a queue, in delivery order, without taking them. */
  peek(name: string): readonly StoredMessage[] {
    return [...(this.#broker.queues.get(name)?.ready ?? [])]
  }

  /** Takes the next ready message from a queue. */
  get(name: string): StoredMessage | undefined {
    const queue = this.#broker.queues.get(name)
    if (queue === undefined) return undefined
    const message = this.#broker.takeHead(queue)
    this.#broker.scheduleExpiry(queue)
    return message
  }

  /** The arguments a queue was declared with, and its type. */
  queueInfo(name: string):
    | {
        readonly type: 'classic' | 'quorum'
        readonly arguments: Readonly<Record<string, HeaderValue>>
      }
    | undefined {
    const queue = this.#broker.queues.get(name)
    return queue && { type: queue.type, arguments: queue.arguments }
  }

  /** Deletes a queue, its bindings and its messages; its consumers are cancelled. */
  deleteQueue(name: string): void {
    this.#broker.deleteQueue(name)
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
}
