import { hostname } from 'node:os'
import { ClosedError, ConfigurationError, ErrorCodes } from '@acemq/core'
import {
  DEFAULT_MAX_UNCONFIRMED,
  describeError,
  toMillis,
  type Declaration,
  type Delivery,
  type OutgoingMessage,
  type Transport,
  type TransportConsumeOptions,
  type TransportEvent,
  type TransportPublishOptions,
  type TransportState,
  type TransportSubscription,
} from '@acemq/core/spi'
import {
  DEFAULT_CONNECT_TIMEOUT,
  DEFAULT_HEARTBEAT,
  DEFAULT_NODE_ORDER,
  DEFAULT_RECOVERY_INITIAL_DELAY,
  DEFAULT_RECOVERY_MAX_DELAY,
} from './amqp-transport-options.js'
import type {
  AmqpConnectTargets,
  AmqpTransportLogger,
  AmqpTransportOptions,
} from './amqp-transport-options.js'
import type { Backoff } from './internal/amqp-helpers.js'
import { ConsumeSide } from './internal/consume-side.js'
import { resolveNodes } from './internal/endpoint.js'
import type { NodeSet } from './internal/endpoint.js'
import { ManagedConnection } from './internal/managed-connection.js'
import { validNodeOrder } from './internal/node-order.js'
import { PublishSide } from './internal/publish-side.js'
import { scrubSecrets } from './internal/secrets.js'
import type { Phase, SideHost } from './internal/side-host.js'

/**
 * The code of the `PublishFailedError` for a publish to an exchange that does not exist:
 * nothing was written, and nothing else failed with it.
 *
 * @deprecated Use `ErrorCodes.EXCHANGE_NOT_FOUND` from `@acemq/core`, the same value (the
 * in-memory transport rejects with it too).
 *
 * @example
 * ```ts
 * catch (e) { if (errorCodeOf(e) === ErrorCodes.EXCHANGE_NOT_FOUND) declareTopology() }
 * ```
 */
export const EXCHANGE_NOT_FOUND = ErrorCodes.EXCHANGE_NOT_FOUND

/** A publish's options when it gives none (not a new object per publish). */
const NO_OPTIONS: TransportPublishOptions = Object.freeze({})

const CONSOLE_LOGGER: AmqpTransportLogger = {
  warn: (message) => console.warn(`[acemq/transport-amqp] ${message}`),
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new ConfigurationError(`${name} must be a positive integer; got ${String(value)}`)
  }
  return value
}

/**
 * The AMQP 0-9-1 (RabbitMQ) transport for AceMQ, on amqplib.
 *
 * It holds **two connections**: one for publishing, with two confirm channels (application
 * publishes, and the engine's moves on a lane of their own), and one for consuming, with a
 * channel per subscription (and short-lived channels for declarations). A
 * broker under a memory or disk alarm blocks connections that publish — it stops reading their
 * sockets — so acks and declarations sent on the publishing connection would stall until the
 * alarm clears; on their own connection they keep flowing, and consumers keep draining the
 * queues that would relieve the alarm. This is RabbitMQ's own advice.
 *
 * Each connection comes back on its own after a loss (exponential backoff, forever, until
 * `close()`): the consumer connection re-declares everything declared so far, in order, and
 * re-subscribes every live subscription with its original callback; the publish connection
 * opens a fresh confirm channel. Meanwhile publishes fail at once and nothing is queued.
 *
 * @example
 * ```ts
 * const transport = new AmqpTransport('amqp://app:s3cret@rabbit:5672', { connectionName: 'orders' })
 * await transport.connect()
 * await transport.declare([{ kind: 'queue', name: 'orders', type: 'quorum', durable: true, arguments: {} }])
 * await transport.publish({
 *   exchange: '', routingKey: 'orders', body: Buffer.from('{}'), headers: {},
 *   properties: { contentType: 'application/json' }, persistent: true, mandatory: true,
 * })
 * await transport.close()
 * ```
 */
export class AmqpTransport implements Transport, AsyncDisposable {
  /** Always `amqp`. */
  readonly kind = 'amqp'
  readonly #endpoint: NodeSet
  readonly #logger: AmqpTransportLogger
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  /** The publish connection, its two confirm channels, the exchange checks, the blocked state. */
  readonly #publishing: PublishSide
  /** The consume connection, declarations, subscriptions, `basic.get`. */
  readonly #consuming: ConsumeSide
  // The lifecycle, in one place: `connect()` opens both sides (new → connecting → connected,
  // or closed when either first connect fails); while connected each side recovers its own
  // connection and reports through `#refreshOpen` (disconnected / reconnected); `close()`
  // stops both sides, then closes both connections (→ closed).
  #phase: Phase = 'new'
  #connecting: Promise<void> | undefined
  #closing: Promise<void> | undefined
  #reportedOpen = false

  /**
   * Prepares the transport; nothing connects until {@link AmqpTransport.connect}. Options are
   * validated here and a bad one throws a `ConfigurationError` naming it.
   *
   * @example
   * ```ts
   * const transport = new AmqpTransport({ hostname: 'rabbit', username: 'app', password: 's3cret' })
   * ```
   */
  constructor(url: AmqpConnectTargets, options: AmqpTransportOptions = {}) {
    const maxUnconfirmed = positiveInteger(
      options.maxUnconfirmed ?? DEFAULT_MAX_UNCONFIRMED,
      'maxUnconfirmed',
    )
    const heartbeatMs = toMillis(options.heartbeat ?? DEFAULT_HEARTBEAT, 'heartbeat')
    const connectTimeoutMs = toMillis(
      options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT,
      'connectTimeout',
    )
    if (connectTimeoutMs < 1) {
      throw new ConfigurationError(
        `connectTimeout must be at least 1 ms; got ${String(options.connectTimeout)}`,
      )
    }
    const recovery = options.recovery ?? {}
    const backoff: Backoff | undefined =
      recovery === false
        ? undefined
        : {
            initialDelay: toMillis(
              recovery.initialDelay ?? DEFAULT_RECOVERY_INITIAL_DELAY,
              'recovery.initialDelay',
            ),
            maxDelay: toMillis(
              recovery.maxDelay ?? DEFAULT_RECOVERY_MAX_DELAY,
              'recovery.maxDelay',
            ),
          }
    if (backoff !== undefined && backoff.maxDelay < backoff.initialDelay) {
      throw new ConfigurationError(
        `recovery.maxDelay (${backoff.maxDelay} ms) must not be shorter than recovery.initialDelay (${backoff.initialDelay} ms)`,
      )
    }
    const connectionName = options.connectionName ?? `acemq@${hostname()}`
    if (typeof connectionName !== 'string' || connectionName === '') {
      throw new ConfigurationError(
        `connectionName must be a non-empty string; got ${JSON.stringify(connectionName)}`,
      )
    }
    const nodeOrder = validNodeOrder(options.nodeOrder ?? DEFAULT_NODE_ORDER)
    this.#endpoint = resolveNodes(url, {
      heartbeatSeconds: Math.ceil(heartbeatMs / 1_000),
      heartbeatExplicit: options.heartbeat !== undefined,
      connectionName,
      connectTimeoutMs,
      socketOptions: options.socketOptions,
      tls: options.tls,
    })
    this.#logger = options.logger ?? CONSOLE_LOGGER
    const resubscribeBackoff = backoff ?? {
      initialDelay: DEFAULT_RECOVERY_INITIAL_DELAY,
      maxDelay: DEFAULT_RECOVERY_MAX_DELAY,
    }
    const endpoint = this.#endpoint
    const host: SideHost = {
      description: () => this.description,
      phase: () => this.#phase,
      connection: (role, hooks) =>
        new ManagedConnection(role, endpoint, nodeOrder, backoff, connectTimeoutMs, hooks),
      refreshOpen: (error) => this.#refreshOpen(error),
      emit: (event) => this.#emit(event),
      safeError: (error) => this.#safeError(error),
      scrub: (text) => scrubSecrets(text, endpoint.secrets),
      warn: (message) => this.#warn(message),
      close: () => this.close(),
    }
    this.#publishing = new PublishSide(host, maxUnconfirmed)
    this.#consuming = new ConsumeSide(host, resubscribeBackoff, (declaration) => {
      if (declaration.kind === 'exchange') this.#publishing.exchangeDeclared(declaration.name)
    })
  }

  /**
   * Where the transport connects, with every password replaced by `***`: the URL of its one
   * node; for a list of nodes, the node each connection is on
   * (`publish on amqp://app:***@rabbit-1:5672, consume on amqp://app:***@rabbit-3:5672 (nodes: rabbit-1:5672, rabbit-2:5672, rabbit-3:5672)`,
   * a connection being recovered shows as `publish recovering`), or `one of <each node>`
   * before connecting and after closing. Health shows it as the `transport` detail.
   *
   * @example
   * ```ts
   * console.log(transport.description) // 'amqp://app:***@rabbit:5672/orders'
   * ```
   */
  get description(): string {
    const { nodes } = this.#endpoint
    if (nodes.length === 1 || this.#phase !== 'connected') return this.#endpoint.description
    const { publish, consume } = this.connectedNodes
    const on = (role: string, node: string | undefined): string =>
      node === undefined ? `${role} recovering` : `${role} on ${node}`
    return `${on('publish', publish)}, ${on('consume', consume)} (nodes: ${nodes.map((node) => node.address).join(', ')})`
  }

  /**
   * The node each connection is on (its URL without the password), `undefined` for one that
   * is not open (before connecting, while recovering, after closing).
   *
   * @example
   * ```ts
   * const { publish, consume } = transport.connectedNodes // 'amqp://app:***@rabbit-2:5672', ...
   * ```
   */
  get connectedNodes(): {
    readonly publish: string | undefined
    readonly consume: string | undefined
  } {
    return Object.freeze({
      publish: this.#publishing.node?.description,
      consume: this.#consuming.node?.description,
    })
  }

  /**
   * A snapshot of the connection: `open` while both connections are up, `blocked` while the
   * broker blocks the publishing connection.
   *
   * @example
   * ```ts
   * if (transport.state.blocked) console.log(transport.state.blockedReason)
   * ```
   */
  get state(): TransportState {
    const blockedReason = this.#publishing.blockedReason
    return Object.freeze({
      open: this.#isOpen(),
      closed: this.#phase === 'closed',
      blocked: blockedReason !== undefined,
      blockedReason,
    })
  }

  /**
   * Publishes waiting for their broker confirm right now, on both lanes (at most
   * `maxUnconfirmed` on each).
   *
   * @example
   * ```ts
   * metrics.gauge('amqp.unconfirmed', transport.unconfirmed)
   * ```
   */
  get unconfirmed(): number {
    return this.#publishing.unconfirmed
  }

  /**
   * Opens both connections and the publish channel. Fails fast (one attempt, no retries) with
   * an `AceMqError` (`ACEMQ_CONNECTION_FAILED`) that never contains the password; a transport
   * whose connect failed is closed. Calling it again returns the same promise.
   *
   * @example
   * ```ts
   * await transport.connect()
   * ```
   */
  connect(): Promise<void> {
    if (this.#connecting !== undefined) return this.#connecting
    if (this.#phase === 'closed') {
      return Promise.reject(new ClosedError(`the transport to ${this.description} is closed`))
    }
    this.#phase = 'connecting'
    this.#connecting = this.#connect()
    return this.#connecting
  }

  async #connect(): Promise<void> {
    const results = await Promise.allSettled([this.#publishing.open(), this.#consuming.open()])
    const failure = results.find((result) => result.status === 'rejected')
    if (failure !== undefined || this.#phase === 'closed') {
      await this.close()
      throw failure === undefined
        ? new ClosedError(`the transport to ${this.description} was closed while connecting`)
        : failure.reason
    }
    this.#phase = 'connected'
    this.#reportedOpen = this.#isOpen()
  }

  /**
   * Declares exchanges, queues and bindings, in order, on the consumer connection (which a
   * broker alarm never blocks). Every declaration that succeeds is remembered and declared
   * again, in the same order, after each reconnect. Queues: `x-queue-type: quorum` only for
   * quorum queues, integer arguments as 64-bit. A refusal (`PRECONDITION_FAILED` for a queue
   * that exists with other arguments) rejects with an `AceMqError` (`ACEMQ_DECLARATION_FAILED`)
   * naming what was declared; the transport keeps working.
   *
   * @example
   * ```ts
   * await transport.declare([
   *   { kind: 'exchange', name: 'acemq.dlx', type: 'direct', durable: true, arguments: {} },
   *   { kind: 'queue', name: 'orders.dlq', type: 'classic', durable: true, arguments: {} },
   *   { kind: 'binding', queue: 'orders.dlq', exchange: 'acemq.dlx', routingKey: 'orders.dlq', arguments: {} },
   * ])
   * ```
   */
  declare(declarations: readonly Declaration[]): Promise<void> {
    return this.#consuming.declare(declarations)
  }

  /**
   * Stops declaring `declarations` again after a reconnect (what is on the broker stays): for
   * something short-lived that is done with, such as a closed requester's reply queue.
   */
  forget(declarations: readonly Declaration[]): void {
    this.#consuming.forget(declarations)
  }

  /**
   * Publishes on a confirm channel and resolves once the broker has confirmed the message and,
   * when `mandatory`, routed it. `lane: 'engine'` (the engine's retries and moves) uses a
   * confirm channel and window of its own, never shared with application publishes (the
   * default). The first publish to an exchange checks, once, that it exists (a passive declare
   * on a short-lived channel), so a publish to a missing exchange fails alone.
   *
   * Rejects with `UnroutableError` (returned), `PublishFailedError` (the exchange does not
   * exist — code `ACEMQ_EXCHANGE_NOT_FOUND`, nothing written; nacked; the channel or connection
   * closed before the confirm; the connection is down and recovering — at once, nothing is
   * queued), `ConnectionBlockedError` (the broker blocked the connection and `whenBlocked` is
   * `reject`), or an `AbortError` from `options.signal` while it waits for a confirm slot, the
   * write buffer, the exchange check or an unblock.
   *
   * @example
   * ```ts
   * await transport.publish(
   *   { exchange: '', routingKey: 'orders', body, headers: { 'x-acemq-attempt': { '!': 'int', value: 1 } },
   *     properties: { messageId: id, contentType: 'application/json' }, persistent: true, mandatory: true },
   *   { whenBlocked: 'wait', signal: AbortSignal.timeout(30_000) },
   * )
   * ```
   */
  publish(message: OutgoingMessage, options?: TransportPublishOptions): Promise<void> {
    return this.#publishing.publish(message, options ?? NO_OPTIONS)
  }

  /**
   * Subscribes to `queue` on a channel of its own with per-consumer prefetch and manual acks.
   * `onDelivery` is called once per delivery, in order. The subscription survives reconnects
   * and broker cancellations (it re-declares and re-subscribes with backoff until closed).
   * Rejects with an `AceMqError` (`ACEMQ_NOT_FOUND`) when the queue does not exist, and
   * `ACEMQ_CONSUME_FAILED` when the broker refuses the subscription for another reason.
   *
   * @example
   * ```ts
   * const subscription = await transport.consume('orders', { prefetch: 20 }, (delivery) => {
   *   handle(delivery.body).then(() => delivery.ack(), () => delivery.nack(true))
   * })
   * await subscription.close()
   * ```
   */
  consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    return this.#consuming.consume(queue, options, onDelivery)
  }

  /**
   * Takes the message at the head of `queue` without acknowledging it (`basic.get`, manual
   * ack) on a channel of the consumer connection kept for gets; `undefined` when the queue is
   * empty. Settle it with `ack` or `nack`; one left unsettled goes back to the queue when that
   * channel or the transport closes. Rejects with an `AceMqError` (`ACEMQ_NOT_FOUND`) when the
   * queue does not exist.
   *
   * @example
   * ```ts
   * const delivery = await transport.getOne('orders.dlq')
   * delivery?.nack(true)
   * ```
   */
  getOne(queue: string): Promise<Delivery | undefined> {
    return this.#consuming.getOne(queue)
  }

  /**
   * Messages ready in `queue` (a passive declare), not counting those handed out and not yet
   * settled. Rejects with an `AceMqError` (`ACEMQ_NOT_FOUND`) when the queue does not exist.
   *
   * @example
   * ```ts
   * await transport.queueLength('orders.dlq') // 3
   * ```
   */
  queueLength(queue: string): Promise<number> {
    return this.#consuming.queueLength(queue)
  }

  /**
   * Listens for `disconnected`, `reconnected`, `blocked`, `unblocked` and `closed`. A listener
   * that throws is reported to the logger and does not stop the others.
   *
   * @example
   * ```ts
   * const stop = transport.onEvent((event) => console.log(event.type))
   * stop()
   * ```
   */
  onEvent(listener: (event: TransportEvent) => void): () => void {
    this.#listeners.add(listener)
    return () => {
      this.#listeners.delete(listener)
    }
  }

  /**
   * Closes every subscription's channel (unsettled deliveries go back to the queue), rejects
   * every outstanding and waiting publish with `PublishFailedError`, stops recovery and closes
   * both connections. Never throws, even for connections that are already dead; safe to call
   * twice (the second call returns the first's promise).
   *
   * @example
   * ```ts
   * await transport.close()
   * ```
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown()
    return this.#closing
  }

  /**
   * `await using transport = new AmqpTransport(url)` closes it at the end of the scope.
   *
   * @example
   * ```ts
   * await using transport = new AmqpTransport(url)
   * ```
   */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  /** Publishes fail first, then the consumers stop, then both connections close. */
  async #shutdown(): Promise<void> {
    this.#phase = 'closed'
    this.#publishing.stop()
    await this.#consuming.stop()
    await Promise.allSettled([
      this.#publishing.closeConnection(),
      this.#consuming.closeConnection(),
    ])
    this.#reportedOpen = false
    this.#emit({ type: 'closed' })
  }

  #isOpen(): boolean {
    return this.#phase === 'connected' && this.#publishing.isOpen && this.#consuming.isOpen
  }

  #refreshOpen(error: Error | undefined): void {
    if (this.#phase !== 'connected') return
    const open = this.#isOpen()
    if (this.#reportedOpen && !open) {
      this.#reportedOpen = false
      this.#emit({ type: 'disconnected', error: this.#safeError(error) })
    } else if (!this.#reportedOpen && open) {
      this.#reportedOpen = true
      this.#emit({ type: 'reconnected' })
    }
  }

  #safeError(error: Error | undefined): Error | undefined {
    if (error === undefined) return undefined
    const message = scrubSecrets(error.message, this.#endpoint.secrets)
    return message === error.message ? error : new Error(message)
  }

  #emit(event: TransportEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event)
      } catch (error) {
        this.#warn(`a transport event listener ('${event.type}') threw: ${describeError(error)}`)
      }
    }
  }

  #warn(message: string): void {
    try {
      this.#logger.warn(scrubSecrets(message, this.#endpoint.secrets))
    } catch {
      // A failing logger must not break the transport.
    }
  }
}
