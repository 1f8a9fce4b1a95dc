/**
 * The seam between the engine in `@acemq/core` and a broker client. A transport moves bytes,
 * declares queues and reports the connection's state; every decision (retry, dead-letter,
 * park, in-progress, pause, drain) is the engine's. `@acemq/transport-amqp` and
 * {@link InMemoryTransport} implement it; a contributed transport reuses the whole engine.
 */

import type { HeaderValue, Headers } from '../headers/header-values.js'

// The header value types live with their readers, below both the envelope and the transports
// (docs/design.md §1); they are part of the transport seam's public face.
export type { HeaderValue, Headers, TypedInteger } from '../headers/header-values.js'

/** Basic properties of a message, other than its headers. */
export interface MessageProperties {
  readonly contentType?: string
  readonly contentEncoding?: string
  readonly messageId?: string
  readonly correlationId?: string
  readonly replyTo?: string
  readonly expiration?: string
  readonly timestamp?: number
  readonly type?: string
  readonly appId?: string
  readonly userId?: string
  readonly priority?: number
}

/** What the engine asks a transport to publish. */
export interface OutgoingMessage {
  readonly exchange: string
  readonly routingKey: string
  readonly body: Uint8Array
  readonly headers: Headers
  readonly properties: MessageProperties
  /** Delivery mode 2. Every message AceMQ writes is persistent. */
  readonly persistent: boolean
  /** Ask the broker to return the message if no queue is bound for it. */
  readonly mandatory: boolean
}

/** Options for one publish. */
export interface TransportPublishOptions {
  /**
   * On a broker-blocked connection: `reject` (the default, for application publishes) fails
   * at once with `ConnectionBlockedError`; `wait` waits for the broker to unblock (the
   * engine's own moves, so a failing message is not spun through its handler meanwhile).
   */
  readonly whenBlocked?: 'reject' | 'wait'
  /** Abandons a publish that is still waiting for room, for the connection or for unblocking. */
  readonly signal?: AbortSignal
  /**
   * Which confirm channel carries the publish. `engine` (the engine's retries, put-backs and
   * moves) never shares a channel with `application` publishes (the default), so an
   * application's bad publish (to a missing exchange, say) cannot take the engine's
   * outstanding confirms down with it. A transport with no channels may ignore it.
   */
  readonly lane?: 'application' | 'engine'
}

/**
 * One message handed to a consumer. `ack` and `nack` never throw: a settlement on a channel
 * that has since closed is dropped (the broker redelivers the message), and they answer
 * whether the settlement was written.
 */
export interface Delivery {
  readonly body: Uint8Array
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly redelivered: boolean
  /**
   * The headers as they travel, with every integer's wire width kept (as {@link TypedInteger}
   * or the client's own typed notation) and nothing removed: a copy the engine republishes
   * starts from these, so a foreign header keeps its type and an `x-acemq-*` header the engine
   * does not know survives the copy. A transport that keeps no widths may leave it out; the
   * engine then uses {@link Delivery.headers}.
   */
  readonly wireHeaders?: Headers | undefined
  /**
   * Whether a settlement can still be written: `false` once the channel the delivery came on
   * has closed (the broker puts it back and redelivers it) or once it has been settled. The
   * engine never starts a handler for a delivery that is no longer settleable. Left out, it
   * counts as `true`.
   */
  readonly settleable?: boolean | undefined
  ack(): boolean
  nack(requeue: boolean): boolean
}

/**
 * What happened to one subscription's channel.
 * - `channel-lost`: the channel closed (a channel error, the broker's `consumer_timeout`, the
 *   connection dropping): every delivery not yet settled on it is no longer
 *   {@link Delivery.settleable} and goes back to the queue. The transport subscribes again on
 *   its own when it can.
 * - `consuming`: the subscription is consuming again after a `channel-lost`.
 */
export type SubscriptionStatus =
  | { readonly type: 'channel-lost'; readonly error: Error | undefined }
  | { readonly type: 'consuming' }

/** Options for a subscription. */
export interface TransportConsumeOptions {
  /** Unacknowledged deliveries this consumer may hold; per consumer, never channel-global. */
  readonly prefetch: number
  /** Told when the subscription's channel is lost and when it consumes again. Must not throw. */
  readonly onStatus?: (status: SubscriptionStatus) => void
}

/** A live subscription. It survives reconnects: a transport re-subscribes it after recovery. */
export interface TransportSubscription {
  /** Stops new deliveries (`basic.cancel`). Deliveries already handed over can still be settled. */
  cancel(): Promise<void>
  /** Closes the subscription's channel: every delivery not yet settled goes back to the queue. */
  close(): Promise<void>
}

/** The kind of a declared exchange. */
export type ExchangeType = 'direct' | 'topic' | 'fanout' | 'headers'

/** One thing a transport declares. Declarations are durable and idempotent. */
export type Declaration =
  | {
      readonly kind: 'exchange'
      readonly name: string
      readonly type: ExchangeType
      readonly durable: boolean
      readonly arguments: Readonly<Record<string, HeaderValue>>
    }
  | {
      readonly kind: 'queue'
      readonly name: string
      /** `quorum` is declared with `x-queue-type: quorum`; `classic` gets no `x-queue-type` at all. */
      readonly type: 'classic' | 'quorum'
      readonly durable: boolean
      /** Integer arguments are declared 64-bit. */
      readonly arguments: Readonly<Record<string, HeaderValue>>
    }
  | {
      readonly kind: 'binding'
      readonly queue: string
      readonly exchange: string
      readonly routingKey: string
      readonly arguments: Readonly<Record<string, HeaderValue>>
    }

/** Something that happened to the connection. */
export type TransportEvent =
  | { readonly type: 'blocked'; readonly reason: string }
  | { readonly type: 'unblocked' }
  | { readonly type: 'disconnected'; readonly error: Error | undefined }
  | { readonly type: 'reconnected' }
  | { readonly type: 'closed' }

/** A snapshot of the connection. */
export interface TransportState {
  /** The connection is up (false while recovering and after close). */
  readonly open: boolean
  /** The connection has been closed on purpose and will not come back. */
  readonly closed: boolean
  /** The broker has blocked publishing on this connection. */
  readonly blocked: boolean
  /** Why, as the broker said (`low on memory`), while known. */
  readonly blockedReason: string | undefined
}

/**
 * A broker client as the engine sees it.
 *
 * @example
 * ```ts
 * const mq = await AceMq.connect(new InMemoryTransport())
 * ```
 */
export interface Transport {
  /** A short name for health and telemetry: `amqp`, `in-memory`. */
  readonly kind: string
  /** Where it connects, safe to show: a URL never includes its password. */
  readonly description: string
  readonly state: TransportState
  /** Opens the connection. Called once by `AceMq.connect`. */
  connect(): Promise<void>
  /** Declares exchanges, queues and bindings, in order; re-declared after every recovery. */
  declare(declarations: readonly Declaration[]): Promise<void>
  /**
   * Stops re-declaring `declarations` after a recovery; what is on the broker stays. Optional:
   * a transport that re-declares nothing has nothing to forget.
   */
  forget?(declarations: readonly Declaration[]): void
  /**
   * Publishes and resolves once the broker has confirmed it and, for a mandatory message,
   * routed it. Rejects with `UnroutableError`, `ConnectionBlockedError`, `PublishFailedError`.
   */
  publish(message: OutgoingMessage, options?: TransportPublishOptions): Promise<void>
  /** Subscribes to a queue. `onDelivery` is called once per delivery, in order. */
  consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription>
  /**
   * Takes the message at the head of `queue` without acknowledging it (AMQP `basic.get` with
   * manual ack), or resolves `undefined` when the queue is empty. The delivery is settled like
   * a consumed one: `ack` removes it, `nack(true)` puts it back; one left unsettled goes back
   * when the transport closes. Rejects when the queue does not exist. Optional: replaying a
   * dead-letter queue needs it; a transport without it cannot replay.
   */
  getOne?(queue: string): Promise<Delivery | undefined>
  /**
   * How many messages are ready in `queue` (not counting those handed out and not yet
   * settled). Rejects when the queue does not exist. Optional, like {@link Transport.getOne}.
   */
  queueLength?(queue: string): Promise<number>
  /** Listens for connection events; returns a function that stops listening. */
  onEvent(listener: (event: TransportEvent) => void): () => void
  /** Closes every channel and the connection. Safe to call twice. */
  close(): Promise<void>
}
