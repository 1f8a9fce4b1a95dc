import {
  AceMqError,
  ClosedError,
  ConnectionBlockedError,
  PublishFailedError,
  UnroutableError,
  abortError,
} from '../errors.js'
import { headerInteger } from '../envelope/envelope.js'
import type {
  Declaration,
  Delivery,
  ExchangeType,
  Headers,
  HeaderValue,
  MessageProperties,
  OutgoingMessage,
  Transport,
  TransportConsumeOptions,
  TransportEvent,
  TransportPublishOptions,
  TransportState,
  TransportSubscription,
} from './transport.js'

/** A message as it sits in an in-memory queue. */
export interface StoredMessage {
  readonly body: Uint8Array
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly persistent: boolean
  readonly redelivered: boolean
}

interface QueuedMessage extends StoredMessage {
  /** When the queue's `x-message-ttl` runs out (epoch ms), if it has one. */
  readonly expiresAt: number | undefined
}

interface MemoryExchange {
  readonly type: ExchangeType
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly bindings: { readonly queue: string; readonly routingKey: string }[]
}

interface MemoryQueue {
  readonly name: string
  readonly type: 'classic' | 'quorum'
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly ttlMs: number | undefined
  readonly ready: QueuedMessage[]
  readonly subscriptions: MemorySubscription[]
  next: number
  timer: ReturnType<typeof setTimeout> | undefined
}

interface MemorySubscription {
  readonly queue: string
  readonly prefetch: number
  readonly onDelivery: (delivery: Delivery) => void
  readonly unacked: Set<InFlightDelivery>
  cancelled: boolean
  closed: boolean
}

interface InFlightDelivery {
  readonly message: QueuedMessage
  readonly subscription: MemorySubscription
  readonly generation: number
  settled: boolean
}

/**
 * A transport that keeps exchanges and queues in this process: confirms, mandatory routing,
 * per-consumer prefetch, queue TTL and dead-lettering behave as RabbitMQ's do, so handlers,
 * retry policies and shutdown can be tested without a broker. It is also the demo's
 * embedded default. Not durable, not shared between processes.
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
  #open = false
  #closed = false
  #blockedReason: string | undefined
  #generation = 0
  #dispatchScheduled = false

  get state(): TransportState {
    return {
      open: this.#open,
      closed: this.#closed,
      blocked: this.#blockedReason !== undefined,
      blockedReason: this.#blockedReason,
    }
  }

  async connect(): Promise<void> {
    if (this.#closed) throw new ClosedError('the in-memory transport was closed')
    this.#open = true
  }

  async declare(declarations: readonly Declaration[]): Promise<void> {
    this.#assertOpen()
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
    if (!this.#open) {
      throw new PublishFailedError(
        'the in-memory transport is disconnected: the message was not sent',
      )
    }
    if (this.#blockedReason !== undefined) {
      if (options.whenBlocked !== 'wait') throw new ConnectionBlockedError(this.#blockedReason)
      await this.#waitForUnblock(options.signal)
      return this.publish(message, options)
    }
    // A confirm arrives asynchronously, as it does from a broker.
    await Promise.resolve()
    const targets = this.#route(message.exchange, message.routingKey, message.headers)
    if (targets === undefined) {
      throw new PublishFailedError(
        `the in-memory transport has no exchange '${message.exchange}' (NOT_FOUND): the message was not sent`,
      )
    }
    if (targets.length === 0) {
      if (message.mandatory) throw new UnroutableError(message.exchange, message.routingKey)
      return
    }
    for (const queue of targets) {
      this.#enqueue(queue, {
        body: message.body,
        headers: { ...message.headers },
        properties: { ...message.properties },
        exchange: message.exchange,
        routingKey: message.routingKey,
        persistent: message.persistent,
        redelivered: false,
      })
    }
  }

  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    this.#assertOpen()
    const memoryQueue = this.#queues.get(queue)
    if (memoryQueue === undefined) {
      throw new AceMqError(`cannot consume from queue '${queue}': it does not exist (NOT_FOUND)`, {
        code: 'ACEMQ_NOT_FOUND',
      })
    }
    const subscription: MemorySubscription = {
      queue,
      prefetch: options.prefetch,
      onDelivery,
      unacked: new Set(),
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
        subscription.cancelled = true
        subscription.closed = true
        this.#requeueUnacked(subscription)
        const q = this.#queues.get(subscription.queue)
        if (q !== undefined) q.subscriptions.splice(q.subscriptions.indexOf(subscription), 1)
      },
    }
  }

  /**
   * Takes the oldest ready message from `queue` without acknowledging it, as `basic.get` with
   * manual ack does: `ack` removes it, `nack(true)` puts it back at the head, and one left
   * unsettled goes back when the connection drops or closes. `undefined` when it is empty.
   */
  async getOne(queue: string): Promise<Delivery | undefined> {
    this.#assertOpen()
    const memoryQueue = this.#existingQueue(queue, 'get from')
    // An answer arrives asynchronously, as it does from a broker.
    await Promise.resolve()
    const now = Date.now()
    for (;;) {
      const message = memoryQueue.ready.shift()
      if (message === undefined) return undefined
      if (message.expiresAt !== undefined && message.expiresAt <= now) {
        this.#deadLetter(memoryQueue, message, 'expired')
        continue
      }
      // Gets are held by a subscription that is never dispatched to (cancelled, prefetch 0),
      // so a lost or closed connection puts them back like any unacked delivery.
      let getter = memoryQueue.subscriptions.find((s) => s.onDelivery === NO_DISPATCH)
      if (getter === undefined) {
        getter = {
          queue,
          prefetch: 0,
          onDelivery: NO_DISPATCH,
          unacked: new Set(),
          cancelled: true,
          closed: false,
        }
        memoryQueue.subscriptions.push(getter)
      }
      const delivery: InFlightDelivery = {
        message,
        subscription: getter,
        generation: this.#generation,
        settled: false,
      }
      getter.unacked.add(delivery)
      return this.#toDelivery(memoryQueue, delivery)
    }
  }

  /** Messages ready in `queue`; rejects when it does not exist. */
  async queueLength(queue: string): Promise<number> {
    this.#assertOpen()
    return this.#existingQueue(queue, 'count').ready.length
  }

  onEvent(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#open = false
    for (const queue of this.#queues.values()) {
      for (const subscription of [...queue.subscriptions]) {
        subscription.cancelled = true
        subscription.closed = true
        this.#requeueUnacked(subscription)
      }
      queue.subscriptions.length = 0
    }
    for (const wake of this.#unblockWaiters) wake()
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
    for (const wake of this.#unblockWaiters) wake()
    this.#emit({ type: 'unblocked' })
  }

  /**
   * Drops the "connection" as a network failure would: unacked deliveries go back to their
   * queues, late settlements are dropped, then the connection comes back and every
   * subscription is resumed.
   */
  async simulateConnectionLoss(outageMs = 0): Promise<void> {
    this.#assertOpen()
    this.#open = false
    this.#generation++
    this.#blockedReason = undefined
    for (const queue of this.#queues.values()) {
      for (const subscription of queue.subscriptions) this.#requeueUnacked(subscription)
    }
    this.#emit({ type: 'disconnected', error: new Error('simulated connection loss') })
    await new Promise((resolve) => setTimeout(resolve, outageMs))
    if (this.#closed) return
    this.#open = true
    this.#emit({ type: 'reconnected' })
    this.#scheduleDispatch()
  }

  /** Whether a queue exists. */
  hasQueue(name: string): boolean {
    return this.#queues.has(name)
  }

  /** Messages ready in a queue (0 when it does not exist). */
  messageCount(name: string): number {
    return this.#queues.get(name)?.ready.length ?? 0
  }

  /** The messages ready in a queue, oldest first, without taking them. */
  peek(name: string): readonly StoredMessage[] {
    return [...(this.#queues.get(name)?.ready ?? [])]
  }

  /** Takes the oldest ready message from a queue. */
  get(name: string): StoredMessage | undefined {
    const queue = this.#queues.get(name)
    const message = queue?.ready.shift()
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
    for (const subscription of queue.subscriptions) subscription.cancelled = true
    this.#queues.delete(name)
    for (const exchange of this.#exchanges.values()) {
      for (let i = exchange.bindings.length - 1; i >= 0; i--) {
        if (exchange.bindings[i]?.queue === name) exchange.bindings.splice(i, 1)
      }
    }
  }

  // --- Internals ---------------------------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('the in-memory transport is closed')
    if (!this.#open)
      throw new AceMqError('the in-memory transport is not connected', {
        code: 'ACEMQ_NOT_CONNECTED',
      })
  }

  #existingQueue(name: string, what: string): MemoryQueue {
    const queue = this.#queues.get(name)
    if (queue === undefined) {
      throw new AceMqError(`cannot ${what} queue '${name}': it does not exist (NOT_FOUND)`, {
        code: 'ACEMQ_NOT_FOUND',
      })
    }
    return queue
  }

  #emit(event: TransportEvent): void {
    for (const listener of this.#listeners) {
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

  #declareExchange(declaration: Extract<Declaration, { kind: 'exchange' }>): void {
    if (declaration.name === '' || declaration.name.startsWith('amq.')) {
      throw new AceMqError(
        `cannot declare exchange '${declaration.name}': the name is reserved (ACCESS_REFUSED)`,
        {
          code: 'ACEMQ_ACCESS_REFUSED',
        },
      )
    }
    const existing = this.#exchanges.get(declaration.name)
    if (existing === undefined) {
      this.#exchanges.set(declaration.name, {
        type: declaration.type,
        arguments: declaration.arguments,
        bindings: [],
      })
      return
    }
    if (
      existing.type !== declaration.type ||
      !sameArguments(existing.arguments, declaration.arguments)
    ) {
      throw preconditionFailed('exchange', declaration.name)
    }
  }

  #declareQueue(declaration: Extract<Declaration, { kind: 'queue' }>): void {
    const existing = this.#queues.get(declaration.name)
    if (existing !== undefined) {
      if (
        existing.type !== declaration.type ||
        !sameArguments(existing.arguments, declaration.arguments)
      ) {
        throw preconditionFailed('queue', declaration.name)
      }
      return
    }
    const ttl = declaration.arguments['x-message-ttl']
    this.#queues.set(declaration.name, {
      name: declaration.name,
      type: declaration.type,
      arguments: declaration.arguments,
      ttlMs: ttl === undefined ? undefined : headerInteger(ttl),
      ready: [],
      subscriptions: [],
      next: 0,
      timer: undefined,
    })
  }

  #declareBinding(declaration: Extract<Declaration, { kind: 'binding' }>): void {
    const exchange = this.#exchanges.get(declaration.exchange)
    if (exchange === undefined) {
      throw new AceMqError(
        `cannot bind to exchange '${declaration.exchange}': it does not exist (NOT_FOUND)`,
        {
          code: 'ACEMQ_NOT_FOUND',
        },
      )
    }
    if (!this.#queues.has(declaration.queue)) {
      throw new AceMqError(
        `cannot bind queue '${declaration.queue}': it does not exist (NOT_FOUND)`,
        {
          code: 'ACEMQ_NOT_FOUND',
        },
      )
    }
    const duplicate = exchange.bindings.some(
      (b) => b.queue === declaration.queue && b.routingKey === declaration.routingKey,
    )
    if (!duplicate)
      exchange.bindings.push({ queue: declaration.queue, routingKey: declaration.routingKey })
  }

  /** The queues a message goes to; undefined when the exchange does not exist. */
  #route(exchangeName: string, routingKey: string, headers: Headers): MemoryQueue[] | undefined {
    if (exchangeName === '') {
      const queue = this.#queues.get(routingKey)
      return queue === undefined ? [] : [queue]
    }
    const exchange = this.#exchanges.get(exchangeName)
    if (exchange === undefined) return undefined
    const names = new Set<string>()
    for (const binding of exchange.bindings) {
      if (matches(exchange.type, binding.routingKey, routingKey, headers)) names.add(binding.queue)
    }
    return [...names].flatMap((name) => {
      const queue = this.#queues.get(name)
      return queue === undefined ? [] : [queue]
    })
  }

  #enqueue(queue: MemoryQueue, message: StoredMessage): void {
    const expiresAt = queue.ttlMs === undefined ? undefined : Date.now() + queue.ttlMs
    queue.ready.push({ ...message, expiresAt })
    if (expiresAt !== undefined) this.#scheduleExpiry(queue)
    this.#scheduleDispatch()
  }

  #scheduleExpiry(queue: MemoryQueue): void {
    if (queue.timer !== undefined) return
    const head = queue.ready[0]
    if (head?.expiresAt === undefined) return
    queue.timer = setTimeout(
      () => {
        queue.timer = undefined
        this.#expire(queue)
      },
      Math.max(0, head.expiresAt - Date.now()),
    )
    queue.timer.unref?.()
  }

  /** Like RabbitMQ, expires messages from the head of the queue and dead-letters them. */
  #expire(queue: MemoryQueue): void {
    if (this.#queues.get(queue.name) !== queue) return
    const now = Date.now()
    while (queue.ready.length > 0 && (queue.ready[0]?.expiresAt ?? Infinity) <= now) {
      const message = queue.ready.shift() as QueuedMessage
      this.#deadLetter(queue, message, 'expired')
    }
    this.#scheduleExpiry(queue)
  }

  #deadLetter(queue: MemoryQueue, message: QueuedMessage, reason: 'expired' | 'rejected'): void {
    const exchange = queue.arguments['x-dead-letter-exchange']
    if (typeof exchange !== 'string') return
    const routingKeyArgument = queue.arguments['x-dead-letter-routing-key']
    const routingKey =
      typeof routingKeyArgument === 'string' ? routingKeyArgument : message.routingKey
    const death = {
      count: 1,
      reason,
      queue: queue.name,
      time: Math.floor(Date.now() / 1000),
      exchange: message.exchange,
      'routing-keys': [message.routingKey],
    }
    const headers = { ...message.headers, 'x-death': [death], 'x-first-death-reason': reason }
    for (const target of this.#route(exchange, routingKey, headers) ?? []) {
      this.#enqueue(target, { ...message, headers, exchange, routingKey, redelivered: false })
    }
  }

  #requeueUnacked(subscription: MemorySubscription): void {
    const byQueue = this.#queues.get(subscription.queue)
    const pending = [...subscription.unacked]
    subscription.unacked.clear()
    for (const delivery of pending) delivery.settled = true
    if (byQueue === undefined) return
    // Requeued messages go back to the head, oldest first, as RabbitMQ puts them back.
    byQueue.ready.unshift(...pending.map((d) => ({ ...d.message, redelivered: true })))
    this.#scheduleExpiry(byQueue)
    this.#scheduleDispatch()
  }

  #scheduleDispatch(): void {
    if (this.#dispatchScheduled) return
    this.#dispatchScheduled = true
    setImmediate(() => {
      this.#dispatchScheduled = false
      this.#dispatch()
    })
  }

  #dispatch(): void {
    if (!this.#open) return
    for (const queue of this.#queues.values()) {
      const now = Date.now()
      while (queue.ready.length > 0) {
        const subscription = this.#nextSubscription(queue)
        if (subscription === undefined) break
        const message = queue.ready.shift() as QueuedMessage
        if (message.expiresAt !== undefined && message.expiresAt <= now) {
          this.#deadLetter(queue, message, 'expired')
          continue
        }
        const delivery: InFlightDelivery = {
          message,
          subscription,
          generation: this.#generation,
          settled: false,
        }
        subscription.unacked.add(delivery)
        subscription.onDelivery(this.#toDelivery(queue, delivery))
      }
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
        subscription.unacked.size < subscription.prefetch
      ) {
        queue.next = (index + 1) % count
        return subscription
      }
    }
    return undefined
  }

  #toDelivery(queue: MemoryQueue, state: InFlightDelivery): Delivery {
    const { message } = state
    const settle = (): boolean => {
      if (
        state.settled ||
        state.generation !== this.#generation ||
        state.subscription.closed ||
        !this.#open
      ) {
        return false
      }
      state.settled = true
      state.subscription.unacked.delete(state)
      this.#scheduleDispatch()
      return true
    }
    return {
      body: message.body,
      headers: message.headers,
      properties: message.properties,
      exchange: message.exchange,
      routingKey: message.routingKey,
      redelivered: message.redelivered,
      ack: () => settle(),
      nack: (requeue: boolean) => {
        if (!settle()) return false
        if (requeue && this.#queues.get(queue.name) === queue) {
          queue.ready.unshift({ ...message, redelivered: true })
          this.#scheduleExpiry(queue)
        } else if (!requeue) {
          this.#deadLetter(queue, message, 'rejected')
        }
        return true
      },
    }
  }
}

/** The callback of the subscription that holds gets: it is never dispatched to. */
const NO_DISPATCH = (): void => undefined

function preconditionFailed(kind: string, name: string): AceMqError {
  return new AceMqError(
    `cannot declare ${kind} '${name}': it exists with different settings (PRECONDITION_FAILED)`,
    { code: 'ACEMQ_PRECONDITION_FAILED' },
  )
}

function sameArguments(
  a: Readonly<Record<string, HeaderValue>>,
  b: Readonly<Record<string, HeaderValue>>,
): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)])
  for (const key of keys) {
    const left = a[key]
    const right = b[key]
    const leftInt = headerInteger(left)
    if (leftInt !== undefined && leftInt === headerInteger(right)) continue
    if (JSON.stringify(left) !== JSON.stringify(right)) return false
  }
  return true
}

function matches(
  type: ExchangeType,
  bindingKey: string,
  routingKey: string,
  headers: Headers,
): boolean {
  switch (type) {
    case 'direct':
      return bindingKey === routingKey
    case 'fanout':
      return true
    case 'topic':
      return topicMatches(bindingKey.split('.'), routingKey.split('.'))
    case 'headers':
      // Header-exchange bindings carry their match table in arguments; with none, match all.
      return headers !== undefined
  }
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
