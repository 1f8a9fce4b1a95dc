import type {
  Declaration,
  Delivery,
  OutgoingMessage,
  Transport,
  TransportConsumeOptions,
  TransportEvent,
  TransportPublishOptions,
  TransportState,
  TransportSubscription,
} from '@acemq/core/spi'

/** One ack or nack the engine asked for. */
export interface Settlement {
  readonly messageId: string | undefined
  readonly kind: 'ack' | 'nack'
  readonly requeue: boolean
  /** Whether the transport wrote it (false: dropped, e.g. on a closed channel). */
  readonly written: boolean
  readonly at: number
}

/**
 * Wraps a real transport and records every settlement the engine asks for, so a test can
 * see that a late ack was never sent and that nothing is settled twice.
 */
export class RecordingTransport implements Transport {
  readonly settlements: Settlement[] = []
  readonly published: OutgoingMessage[] = []

  constructor(readonly inner: Transport) {}

  get kind(): string {
    return this.inner.kind
  }
  get description(): string {
    return this.inner.description
  }
  get state(): TransportState {
    return this.inner.state
  }
  connect(): Promise<void> {
    return this.inner.connect()
  }
  declare(declarations: readonly Declaration[]): Promise<void> {
    return this.inner.declare(declarations)
  }
  forget(declarations: readonly Declaration[]): void {
    this.inner.forget?.(declarations)
  }
  async publish(message: OutgoingMessage, options?: TransportPublishOptions): Promise<void> {
    await this.inner.publish(message, options)
    this.published.push(message)
    this.lanes.set(message, options?.lane ?? 'application')
  }

  /**
   * The lane each published message went on. Written as the option's own type, so its
   * declaration reads the same whatever order the compiler meets the two names in.
   */
  readonly lanes: Map<OutgoingMessage, NonNullable<TransportPublishOptions['lane']>> = new Map()
  consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    return this.inner.consume(queue, options, (delivery) => onDelivery(this.#wrap(delivery)))
  }
  onEvent(listener: (event: TransportEvent) => void): () => void {
    return this.inner.onEvent(listener)
  }
  close(): Promise<void> {
    return this.inner.close()
  }

  /** Settlements of the message with this id. */
  settlementsOf(messageId: string): Settlement[] {
    return this.settlements.filter((s) => s.messageId === messageId)
  }

  #wrap(delivery: Delivery): Delivery {
    const messageId = delivery.properties.messageId
    return {
      body: delivery.body,
      headers: delivery.headers,
      properties: delivery.properties,
      exchange: delivery.exchange,
      routingKey: delivery.routingKey,
      redelivered: delivery.redelivered,
      get wireHeaders() {
        return delivery.wireHeaders
      },
      get settleable() {
        return delivery.settleable
      },
      ack: () => {
        const written = delivery.ack()
        this.settlements.push({ messageId, kind: 'ack', requeue: false, written, at: Date.now() })
        return written
      },
      nack: (requeue) => {
        const written = delivery.nack(requeue)
        this.settlements.push({ messageId, kind: 'nack', requeue, written, at: Date.now() })
        return written
      },
    }
  }
}
