import { InMemoryTransport, type Headers } from '../../src/index.js'
import {
  type Declaration,
  type Delivery,
  type MessageProperties,
  type OutgoingMessage,
  type SubscriptionStatus,
  type TransportConsumeOptions,
  type TransportEvent,
  type TransportPublishOptions,
  type TransportSubscription,
} from '../../src/spi.js'

// A transport whose subscriptions a test drives by hand: it hands the consumer deliveries it
// made itself (whose `settleable` it sets, whose settlements it records), reports a
// subscription's channel lost or consuming again, and emits connection events. Declarations and
// publishes (the copies the engine writes) go to the in-memory broker underneath.

/** How a {@link ManualDelivery} was settled: acked, nacked with requeue, or nacked without. */
export type ManualSettlement = 'ack' | 'requeue' | 'drop'

/** A delivery made by the test, with the settlements the consumer made of it. */
export class ManualDelivery implements Delivery {
  readonly body: Uint8Array
  readonly headers: Headers = {}
  readonly properties: MessageProperties
  readonly exchange = ''
  readonly routingKey: string
  readonly redelivered = false
  /** What the transport says: left out (undefined), still settleable, or its channel gone. */
  settleable: boolean | undefined
  readonly settlements: ManualSettlement[] = []
  /** The next ack throws this (a transport defect), once. */
  ackThrows: Error | undefined
  /** The next nack throws this, once. */
  nackThrows: Error | undefined

  constructor(
    readonly id: string,
    options: {
      readonly settleable?: boolean
      readonly queue?: string
      readonly body?: string
    } = {},
  ) {
    this.settleable = options.settleable
    this.routingKey = options.queue ?? 'q'
    this.properties = { messageId: id, contentType: 'application/json' }
    this.body = new TextEncoder().encode(options.body ?? '{}')
  }

  ack(): boolean {
    if (this.ackThrows !== undefined) {
      const error = this.ackThrows
      this.ackThrows = undefined
      throw error
    }
    return this.#settle('ack')
  }

  nack(requeue: boolean): boolean {
    if (this.nackThrows !== undefined) {
      const error = this.nackThrows
      this.nackThrows = undefined
      throw error
    }
    return this.#settle(requeue ? 'requeue' : 'drop')
  }

  #settle(how: ManualSettlement): boolean {
    this.settlements.push(how)
    const written = this.settleable !== false
    if (this.settleable === true) this.settleable = false
    return written
  }
}

/** One subscription the consumer made, driven by the test. */
export class ManualSubscription implements TransportSubscription {
  cancels = 0
  closes = 0

  constructor(
    readonly queue: string,
    readonly options: TransportConsumeOptions,
    readonly onDelivery: (delivery: Delivery) => void,
  ) {}

  /** Hands `delivery` to the consumer, as the broker would. */
  deliver(delivery: ManualDelivery): ManualDelivery {
    this.onDelivery(delivery)
    return delivery
  }

  /** Reports the subscription's channel lost (or consuming again). */
  status(status: SubscriptionStatus): void {
    this.options.onStatus?.(status)
  }

  async cancel(): Promise<void> {
    this.cancels++
  }

  async close(): Promise<void> {
    this.closes++
  }
}

export class ManualTransport extends InMemoryTransport {
  readonly subscriptions: ManualSubscription[] = []
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  /** While set, a subscription waits for it before it is made. */
  consumeGate: Promise<void> | undefined
  /** Subscriptions fail this many more times. */
  failConsumes = 0
  /** While set, a declaration waits for it before it is made. */
  declareGate: Promise<void> | undefined

  override async declare(declarations: readonly Declaration[]): Promise<void> {
    if (this.declareGate !== undefined) await this.declareGate
    await super.declare(declarations)
  }

  /** Called with each new subscription before the consumer gets it. */
  onSubscribe: ((subscription: ManualSubscription) => void) | undefined
  /** Every publish, as asked. */
  readonly published: { message: OutgoingMessage; options: TransportPublishOptions | undefined }[] =
    []
  /** Runs before each publish goes to the broker: what it throws fails the publish. */
  beforePublish: ((message: OutgoingMessage) => Promise<void> | void) | undefined

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    this.published.push({ message, options })
    await this.beforePublish?.(message)
    await super.publish(message, options)
  }

  override async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    if (this.consumeGate !== undefined) await this.consumeGate
    if (this.failConsumes > 0) {
      this.failConsumes--
      throw new Error('the broker refused the subscription')
    }
    const subscription = new ManualSubscription(queue, options, onDelivery)
    this.subscriptions.push(subscription)
    // What the broker sends before the consumer has its subscription back (AMQP's consume-ok).
    this.onSubscribe?.(subscription)
    return subscription
  }

  /** The latest subscription. */
  get current(): ManualSubscription {
    const subscription = this.subscriptions.at(-1)
    if (subscription === undefined) throw new Error('no subscription yet')
    return subscription
  }

  override onEvent(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener)
    const inner = super.onEvent(listener)
    return () => {
      this.#listeners.delete(listener)
      inner()
    }
  }

  /** Emits a connection event, as a transport would. */
  emit(event: TransportEvent): void {
    for (const listener of this.#listeners) listener(event)
  }
}
