/**
 * The in-memory broker: its exchanges and queues, messages moving through them (enqueued,
 * expired, put back, dead-lettered) and the subscriptions they are delivered to. The
 * transport owns the connection; the broker asks it, through a {@link BrokerLink}, whether it
 * may deliver.
 */
import { AceMqError } from '../../errors.js'
import { ErrorCodes } from '../../error-codes.js'
import type { Declaration, Delivery, Headers, SubscriptionStatus } from '../transport.js'
import type {
  DeathReason,
  InFlightDelivery,
  MemoryQueue,
  MemorySubscription,
  QueuedMessage,
  StoredMessage,
} from './broker-model.js'
import { deadLetterCopy, diesInCycle } from './dead-lettering.js'
import { declareBinding, declareExchange, predeclaredExchanges, route } from './exchange-routing.js'
import { declareQueue } from './queue-arguments.js'
import { asDecoded } from './wire-values.js'

/** The longest delay setTimeout honours. */
const MAX_TIMER_MS = 2_147_483_647

/** What the broker needs to know of the transport's connection. */
export interface BrokerLink {
  /** The transport was closed: nothing is scheduled any more. */
  isClosed(): boolean
  /** The transport has connected. */
  isConnected(): boolean
  /** The consume side is down for a simulated outage. */
  isConsumeDown(): boolean
}

export class MemoryBroker {
  readonly exchanges = predeclaredExchanges()
  readonly queues = new Map<string, MemoryQueue>()
  readonly #timers = new Set<ReturnType<typeof setTimeout>>()
  readonly #reopens = new Set<ReturnType<typeof setImmediate>>()
  readonly #consumerTimeoutMs: number | undefined
  readonly #link: BrokerLink
  #dispatch: ReturnType<typeof setImmediate> | undefined

  constructor(link: BrokerLink, consumerTimeoutMs: number | undefined) {
    this.#link = link
    this.#consumerTimeoutMs = consumerTimeoutMs
  }

  declare(declaration: Declaration): void {
    switch (declaration.kind) {
      case 'exchange':
        declareExchange(this.exchanges, declaration)
        break
      case 'queue':
        declareQueue(this.queues, this.#consumerTimeoutMs, declaration)
        break
      case 'binding':
        declareBinding(this.exchanges, this.queues, declaration)
        break
    }
  }

  /**
   * Takes the message at the head of `queue` as `basic.get` with manual ack does; undefined
   * when the queue is empty.
   */
  getOne(queue: MemoryQueue): Delivery | undefined {
    const now = Date.now()
    for (;;) {
      const message = this.takeHead(queue)
      if (message === undefined) return undefined
      if (message.expiresAt !== undefined && message.expiresAt <= now) {
        this.deadLetter(queue, message, 'expired')
        continue
      }
      // Gets are held by a subscription that is never dispatched to (it is cancelled), so a
      // lost or closed channel puts them back like any other unacked delivery.
      let getter = queue.subscriptions.find((s) => s.onDelivery === this.#got)
      if (getter === undefined) {
        getter = {
          queue,
          prefetch: 0,
          onDelivery: this.#got,
          onStatus: undefined,
          unacked: new Set(),
          epoch: 0,
          channelOpen: true,
          cancelled: true,
          closed: false,
        }
        queue.subscriptions.push(getter)
      }
      this.#gotten = undefined
      this.deliver(queue, getter, message)
      return this.#gotten
    }
  }

  /** What the get subscription was handed last. */
  #gotten: Delivery | undefined
  readonly #got = (delivery: Delivery): void => {
    this.#gotten = delivery
  }

  /** Deletes a queue, its bindings and its messages; its consumers are cancelled. */
  deleteQueue(name: string): void {
    const queue = this.queues.get(name)
    if (queue === undefined) return
    if (queue.timer) clearTimeout(queue.timer)
    queue.timer = undefined
    for (const subscription of queue.subscriptions) subscription.cancelled = true
    this.queues.delete(name)
    for (const exchange of this.exchanges.values()) {
      for (let i = exchange.bindings.length - 1; i >= 0; i--) {
        if (exchange.bindings[i]?.queue === name) exchange.bindings.splice(i, 1)
      }
    }
  }

  /** Clears every timer and scheduled turn: the transport has closed. */
  stop(): void {
    for (const queue of this.queues.values()) {
      if (queue.timer !== undefined) clearTimeout(queue.timer)
      queue.timer = undefined
    }
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
    for (const handle of this.#reopens) clearImmediate(handle)
    this.#reopens.clear()
    if (this.#dispatch !== undefined) clearImmediate(this.#dispatch)
    this.#dispatch = undefined
  }

  /** A timer that never keeps the process alive and that {@link close} clears. */
  later(work: () => void, ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      work()
    }, ms)
    timer.unref?.()
    this.#timers.add(timer)
    return timer
  }

  cancelTimer(timer: ReturnType<typeof setTimeout> | undefined): void {
    if (timer === undefined) return
    clearTimeout(timer)
    this.#timers.delete(timer)
  }

  // --- Routing and queues ------------------------------------------------------------------

  /** The queues a message goes to; undefined when the exchange does not exist. */
  route(exchange: string, routingKey: string, headers: Headers): MemoryQueue[] | undefined {
    return route(this.exchanges, this.queues, exchange, routingKey, headers)
  }

  enqueue(queue: MemoryQueue, message: StoredMessage): void {
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
    if (queue.ready.length === 1) this.scheduleExpiry(queue)
    this.scheduleDispatch()
  }

  takeHead(queue: MemoryQueue): QueuedMessage | undefined {
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
  putBack(queue: MemoryQueue, message: QueuedMessage, how: 'nack' | 'channel'): void {
    if (this.queues.get(queue.name) !== queue) return
    if (queue.type === 'quorum') {
      const returned: QueuedMessage = {
        ...message,
        redelivered: true,
        returns: message.returns + 1,
      }
      if (queue.deliveryLimit !== undefined && returned.returns > queue.deliveryLimit) {
        this.deadLetter(queue, returned, 'delivery_limit')
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
    this.scheduleExpiry(queue)
    this.scheduleDispatch()
  }

  /** Arms the queue's timer for its head, the only message RabbitMQ expires. */
  scheduleExpiry(queue: MemoryQueue): void {
    const due = queue.ready[0]?.expiresAt ?? Infinity
    if (due === queue.timerDue && queue.timer !== undefined) return
    if (queue.timer !== undefined) this.cancelTimer(queue.timer)
    queue.timer = undefined
    queue.timerDue = due
    if (due === Infinity || this.#link.isClosed()) return
    queue.timer = this.later(
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
    if (this.queues.get(queue.name) !== queue) return
    const now = Date.now()
    while ((queue.ready[0]?.expiresAt ?? Infinity) <= now) {
      this.deadLetter(queue, this.takeHead(queue) as QueuedMessage, 'expired')
    }
    this.scheduleExpiry(queue)
  }

  /** Dead-letters a message that dies in `queue` (docs/design.md §13: the in-memory transport). */
  deadLetter(queue: MemoryQueue, message: QueuedMessage, reason: DeathReason): void {
    const copy = deadLetterCopy(queue, message, reason)
    if (copy === undefined) return
    for (const target of this.route(copy.exchange, copy.routingKey, copy.headers) ?? []) {
      if (!diesInCycle(reason, target.name, copy)) this.enqueue(target, copy)
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
    for (const delivery of pending) this.cancelTimer(delivery.timer)
    for (const delivery of pending) {
      this.putBack(subscription.queue, delivery.message, 'channel')
    }
  }

  loseChannel(subscription: MemorySubscription, error: Error | undefined): void {
    this.#dropChannel(subscription)
    this.#status(subscription, { type: 'channel-lost', error })
  }

  /** A broker channel error: the channel closes, and a tick later the subscription is back. */
  closeChannelOf(subscription: MemorySubscription, reason: string): void {
    this.loseChannel(
      subscription,
      new AceMqError(
        `the in-memory broker closed the channel of the consumer on queue '${subscription.queue.name}': ${reason}`,
        { code: ErrorCodes.CHANNEL_CLOSED },
      ),
    )
    const epoch = subscription.epoch
    const handle = setImmediate(() => {
      this.#reopens.delete(handle)
      if (subscription.epoch === epoch && !this.#link.isConsumeDown()) this.reopen(subscription)
    })
    this.#reopens.add(handle)
  }

  /** A new channel for a subscription whose channel was lost. */
  reopen(subscription: MemorySubscription): void {
    if (subscription.closed || subscription.channelOpen || this.#link.isClosed()) return
    subscription.channelOpen = true
    // A cancelled subscription is not consuming: the AMQP transport does not re-subscribe it.
    if (!subscription.cancelled) this.#status(subscription, { type: 'consuming' })
    this.scheduleDispatch()
  }

  endSubscription(subscription: MemorySubscription): void {
    subscription.cancelled = true
    subscription.closed = true
    this.#dropChannel(subscription)
    const subscriptions = subscription.queue.subscriptions
    const index = subscriptions.indexOf(subscription)
    if (index >= 0) subscriptions.splice(index, 1)
  }

  scheduleDispatch(): void {
    if (this.#dispatch !== undefined || this.#link.isClosed()) return
    this.#dispatch = setImmediate(() => {
      this.#dispatch = undefined
      this.#deliverReady()
    })
  }

  #deliverReady(): void {
    if (this.#link.isClosed() || !this.#link.isConnected() || this.#link.isConsumeDown()) return
    for (const queue of this.queues.values()) {
      const now = Date.now()
      // Only what was ready when this turn began: a message a consumer requeues at once waits
      // for the next turn, as it would wait for the network, instead of looping here.
      let budget = queue.ready.length
      while (queue.ready.length > 0) {
        if (budget-- === 0) {
          this.scheduleDispatch()
          break
        }
        const subscription = this.#nextSubscription(queue)
        if (subscription === undefined) break
        const message = this.takeHead(queue) as QueuedMessage
        if (message.expiresAt !== undefined && message.expiresAt <= now) {
          this.deadLetter(queue, message, 'expired')
          continue
        }
        this.deliver(queue, subscription, message)
      }
      this.scheduleExpiry(queue)
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

  deliver(queue: MemoryQueue, subscription: MemorySubscription, message: QueuedMessage): void {
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
      flight.timer = this.later(() => {
        flight.timer = undefined
        if (!flight.settled && flight.epoch === subscription.epoch && subscription.channelOpen) {
          this.closeChannelOf(
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
      this.cancelTimer(flight.timer)
      subscription.unacked.delete(flight)
      this.scheduleDispatch()
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
        if (requeue) this.putBack(queue, message, 'nack')
        else if (this.queues.get(queue.name) === queue) {
          this.deadLetter(queue, message, 'rejected')
        }
        return true
      },
    }
    subscription.onDelivery(delivery)
  }
}
