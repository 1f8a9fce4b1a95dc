import { hostname } from 'node:os'
import type { Channel, ChannelModel } from 'amqplib'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  DEFAULT_MAX_UNCONFIRMED,
  ErrorCodes,
  PublishFailedError,
  describeError,
  errorCodeOf,
  toMillis,
} from '@acemq/core'
import { abortError } from '@acemq/core/spi'
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
} from '@acemq/core'
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
import { closeChannelQuietly, closeModelQuietly } from './internal/amqp-helpers.js'
import { BasicGetter } from './internal/basic-get.js'
import { ConfirmPublisher } from './internal/confirm-publisher.js'
import {
  applyDeclaration,
  declarationFailed,
  declarationKey,
  describeDeclaration,
  replyCode,
  validateDeclaration,
} from './internal/declarations.js'
import { resolveNodes } from './internal/endpoint.js'
import type { NodeSet } from './internal/endpoint.js'
import { ManagedConnection } from './internal/managed-connection.js'
import type { Backoff } from './internal/amqp-helpers.js'
import { validNodeOrder } from './internal/node-order.js'
import { Permits } from './internal/permits.js'
import { scrubSecrets } from './internal/secrets.js'
import { AmqpSubscription } from './internal/subscription.js'
import type { SubscriptionHost } from './internal/subscription.js'
import { keepHeaderTables } from './internal/wire-headers.js'

type Phase = 'new' | 'connecting' | 'connected' | 'closed'

type LaneName = 'application' | 'engine'

/**
 * One confirm channel on the publish connection with its own confirm window. The engine's
 * retries and moves never share a channel (or a window) with application publishes, so an
 * application's bad publish cannot fail them, nor a full application window hold them back.
 */
interface PublishLane {
  readonly name: LaneName
  readonly permits: Permits
  publisher: ConfirmPublisher | undefined
  opening: boolean
}

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

/** The exchange a `404 NOT_FOUND` channel close names, if it names one. */
function missingExchange(error: unknown): string | undefined {
  if (replyCode(error) !== 404) return undefined
  return /no exchange '(.*)' in vhost/.exec(describeError(error))?.[1]
}

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
  readonly #lanes: Readonly<Record<LaneName, PublishLane>>
  /** Exchanges a passive check (or our own declaration) has found; '' always exists. */
  readonly #knownExchanges = new Set<string>()
  readonly #exchangeChecks = new Map<string, Promise<boolean>>()
  readonly #warnedOnce = new Set<string>()
  readonly #resubscribeBackoff: Backoff
  readonly #publishConnection: ManagedConnection
  readonly #consumeConnection: ManagedConnection
  readonly #listeners = new Set<(event: TransportEvent) => void>()
  readonly #declarations: Declaration[] = []
  readonly #declarationKeys = new Set<string>()
  readonly #subscriptions = new Set<AmqpSubscription>()
  readonly #waiters = new Set<() => void>()
  readonly #subscriptionHost: SubscriptionHost
  readonly #getter = new BasicGetter(() => this.#usableConsumeModel('get a message'))
  #phase: Phase = 'new'
  #connecting: Promise<void> | undefined
  #closing: Promise<void> | undefined
  #reportedOpen = false
  #blockedReason: string | undefined

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
    const lane = (name: LaneName): PublishLane => ({
      name,
      permits: new Permits(maxUnconfirmed),
      publisher: undefined,
      opening: false,
    })
    this.#lanes = { application: lane('application'), engine: lane('engine') }
    this.#resubscribeBackoff = backoff ?? {
      initialDelay: DEFAULT_RECOVERY_INITIAL_DELAY,
      maxDelay: DEFAULT_RECOVERY_MAX_DELAY,
    }

    this.#publishConnection = new ManagedConnection(
      'publish',
      this.#endpoint,
      nodeOrder,
      backoff,
      connectTimeoutMs,
      {
        setup: (model) => this.#openPublisher(model),
        up: () => this.#refreshOpen(undefined),
        down: (error, willRecover) => this.#publishConnectionLost(error, willRecover),
        blocked: (reason) => this.#blocked(reason),
        unblocked: () => this.#unblocked(),
        warn: (message) => this.#warn(message),
      },
    )
    this.#consumeConnection = new ManagedConnection(
      'consume',
      this.#endpoint,
      nodeOrder,
      backoff,
      connectTimeoutMs,
      {
        setup: (model) => this.#setUpConsumeConnection(model),
        up: () => this.#refreshOpen(undefined),
        down: (error, willRecover) => {
          this.#refreshOpen(error)
          if (!willRecover) void this.close()
        },
        // Only a publishing connection is ever blocked; nothing to do for this one.
        blocked: () => undefined,
        unblocked: () => undefined,
        warn: (message) => this.#warn(message),
      },
    )
    this.#subscriptionHost = {
      consumerModel: () => (this.#phase === 'closed' ? undefined : this.#consumeConnection.model),
      replayDeclarations: (model) => this.#replayDeclarations(model),
      removed: (subscription) => this.#subscriptions.delete(subscription),
      resubscribeBackoff: this.#resubscribeBackoff,
      lossOf: (model) => this.#consumeConnection.lossOf(model),
      scrub: (error) => this.#safeError(error),
      warn: (message) => this.#warn(message),
    }
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
      publish: this.#publishConnection.node?.description,
      consume: this.#consumeConnection.node?.description,
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
    return Object.freeze({
      open: this.#isOpen(),
      closed: this.#phase === 'closed',
      blocked: this.#blockedReason !== undefined,
      blockedReason: this.#blockedReason,
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
    const { application, engine } = this.#lanes
    return (application.publisher?.outstanding ?? 0) + (engine.publisher?.outstanding ?? 0)
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
    const results = await Promise.allSettled([
      this.#publishConnection.open(),
      this.#consumeConnection.open(),
    ])
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
  async declare(declarations: readonly Declaration[]): Promise<void> {
    if (!Array.isArray(declarations)) {
      throw new ConfigurationError(`declarations must be an array; got ${typeof declarations}`)
    }
    declarations.forEach((declaration, index) => validateDeclaration(declaration, index))
    if (declarations.length === 0) return
    const model = this.#usableConsumeModel('declare anything')
    let channel: Channel
    try {
      channel = await this.#openChannel(model)
    } catch (error) {
      throw this.#connectionTrouble(`could not open a channel to declare`, error)
    }
    try {
      for (const declaration of declarations) {
        try {
          await applyDeclaration(channel, declaration)
        } catch (error) {
          if (replyCode(error) !== undefined && this.#consumeConnection.model === model) {
            throw declarationFailed(declaration, error)
          }
          throw this.#connectionTrouble(
            `the connection was lost while declaring ${describeDeclaration(declaration)}`,
            error,
          )
        }
        this.#remember(declaration)
        if (declaration.kind === 'exchange') this.#knownExchanges.add(declaration.name)
      }
    } finally {
      await closeChannelQuietly(channel)
    }
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
  publish(message: OutgoingMessage, options: TransportPublishOptions = {}): Promise<void> {
    let whenBlocked: 'reject' | 'wait'
    let lane: PublishLane
    try {
      validateMessage(message)
      whenBlocked = options.whenBlocked ?? 'reject'
      if (whenBlocked !== 'reject' && whenBlocked !== 'wait') {
        throw new ConfigurationError(
          `options.whenBlocked must be 'reject' or 'wait'; got ${JSON.stringify(whenBlocked)}`,
        )
      }
      const laneName = options.lane ?? 'application'
      if (laneName !== 'application' && laneName !== 'engine') {
        throw new ConfigurationError(
          `options.lane must be 'application' or 'engine'; got ${JSON.stringify(laneName)}`,
        )
      }
      lane = this.#lanes[laneName]
      if (options.signal?.aborted) throw abortError(options.signal)
      // The common case waits for nothing: write now, without the waiting loop's async frame
      // (one promise and a few microtask turns less per message).
      this.#assertCanPublish()
      const publisher = lane.publisher
      if (
        this.#blockedReason === undefined &&
        publisher !== undefined &&
        publisher.isOpen &&
        !publisher.needsDrain &&
        this.#exchangeKnown(message.exchange) &&
        lane.permits.tryAcquire()
      ) {
        try {
          // The permit now belongs to the pending publish, which returns it when it settles.
          return publisher.write(message)
        } catch (error) {
          lane.permits.release()
          throw error
        }
      }
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#publishWhenReady(message, lane, whenBlocked, options.signal)
  }

  /**
   * {@link AmqpTransport.publish} when it has to wait: for the exchange check, a permit, an
   * unblock, a drain or a channel.
   */
  async #publishWhenReady(
    message: OutgoingMessage,
    lane: PublishLane,
    whenBlocked: 'reject' | 'wait',
    signal: AbortSignal | undefined,
  ): Promise<void> {
    let holdsPermit = false
    const releasePermit = (): void => {
      if (holdsPermit) lane.permits.release()
      holdsPermit = false
    }
    try {
      for (;;) {
        this.#assertCanPublish()
        if (this.#blockedReason !== undefined) {
          releasePermit()
          if (whenBlocked === 'reject') throw new ConnectionBlockedError(this.#blockedReason)
          await this.#waitForChange(signal)
          continue
        }
        if (!this.#exchangeKnown(message.exchange)) {
          releasePermit()
          if (!(await withSignal(this.#checkExchange(message.exchange), signal))) {
            throw this.#exchangeNotFound(message.exchange)
          }
          continue
        }
        const publisher = lane.publisher
        if (publisher === undefined || !publisher.isOpen) {
          // The channel is being reopened on a live connection (a channel error closed it).
          await this.#waitForChange(signal)
          continue
        }
        if (!holdsPermit) {
          if (!lane.permits.tryAcquire()) {
            await lane.permits.acquire(signal)
            holdsPermit = true
            continue
          }
          holdsPermit = true
        }
        if (publisher.needsDrain) {
          await this.#waitForChange(signal)
          continue
        }
        const confirmed = publisher.write(message)
        // The permit now belongs to the pending publish, which returns it when it settles.
        holdsPermit = false
        return await confirmed
      }
    } finally {
      releasePermit()
    }
  }

  #exchangeKnown(exchange: string): boolean {
    return exchange === '' || this.#knownExchanges.has(exchange)
  }

  /** Whether `exchange` exists; concurrent first publishes to it share one check. */
  #checkExchange(exchange: string): Promise<boolean> {
    let check = this.#exchangeChecks.get(exchange)
    if (check === undefined) {
      check = this.#probeExchange(exchange).finally(() => this.#exchangeChecks.delete(exchange))
      this.#exchangeChecks.set(exchange, check)
    }
    return check
  }

  /**
   * A passive declare on a short-lived channel of the publish connection: a missing exchange
   * closes that channel (404), never a publish channel with confirms outstanding on it.
   */
  async #probeExchange(exchange: string): Promise<boolean> {
    const model = this.#publishConnection.model
    if (model === undefined || !this.#publishConnection.isOpen) {
      throw new PublishFailedError(
        `the connection to ${this.description} is down and recovering: the message was not sent`,
      )
    }
    let channel: Channel
    try {
      channel = await this.#openChannel(model)
    } catch (error) {
      throw this.#checkFailed(exchange, error)
    }
    try {
      await channel.checkExchange(exchange)
      if (this.#publishConnection.model === model) this.#knownExchanges.add(exchange)
      return true
    } catch (error) {
      if (replyCode(error) === 404) return false
      throw this.#checkFailed(exchange, error)
    } finally {
      void closeChannelQuietly(channel)
    }
  }

  #checkFailed(exchange: string, error: unknown): PublishFailedError {
    if (this.#phase === 'closed') return this.#closedError()
    return new PublishFailedError(
      `could not check that exchange '${exchange}' exists on ${this.description}, so the message was not sent: ${scrubSecrets(describeError(error), this.#endpoint.secrets)}`,
      { cause: error instanceof Error ? this.#safeError(error) : error },
    )
  }

  #exchangeNotFound(exchange: string): PublishFailedError {
    return new PublishFailedError(
      `exchange '${exchange}' does not exist on ${this.description}: the message was not sent`,
      { code: EXCHANGE_NOT_FOUND },
    )
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
  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    const prefetch: unknown = (options as Partial<TransportConsumeOptions> | undefined)?.prefetch
    if (
      typeof prefetch !== 'number' ||
      !Number.isInteger(prefetch) ||
      prefetch < 0 ||
      prefetch > 65_535
    ) {
      throw new ConfigurationError(
        `options.prefetch must be an integer from 0 to 65535; got ${String(prefetch)}`,
      )
    }
    if (typeof onDelivery !== 'function') {
      throw new ConfigurationError(`onDelivery must be a function; got ${typeof onDelivery}`)
    }
    const model = this.#usableConsumeModel(`subscribe to queue '${queue}'`)
    const onStatus: unknown = (options as Partial<TransportConsumeOptions>).onStatus
    if (onStatus !== undefined && typeof onStatus !== 'function') {
      throw new ConfigurationError(`options.onStatus must be a function; got ${typeof onStatus}`)
    }
    const subscription = new AmqpSubscription(
      this.#subscriptionHost,
      queue,
      prefetch,
      onDelivery,
      onStatus as TransportConsumeOptions['onStatus'],
    )
    this.#subscriptions.add(subscription)
    try {
      await subscription.start(model)
    } catch (error) {
      this.#subscriptions.delete(subscription)
      const reply = replyCode(error)
      if (reply !== undefined && this.#consumeConnection.model === model) {
        // 404: the queue does not exist, the code getOne and queueLength (and the in-memory
        // transport) give for it too.
        const code = reply === 404 ? ErrorCodes.NOT_FOUND : ErrorCodes.CONSUME_FAILED
        throw new AceMqError(
          `could not subscribe to queue '${queue}' on ${this.description}: ${describeError(error)}`,
          { code, cause: error },
        )
      }
      throw this.#connectionTrouble(`could not subscribe to queue '${queue}'`, error)
    }
    return subscription
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
  async getOne(queue: string): Promise<Delivery | undefined> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    try {
      return await this.#getter.get(queue)
    } catch (error) {
      throw this.#queueTrouble(`could not get a message from queue '${queue}'`, queue, error)
    }
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
  async queueLength(queue: string): Promise<number> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    try {
      return await this.#getter.queueLength(queue)
    } catch (error) {
      throw this.#queueTrouble(`could not count queue '${queue}'`, queue, error)
    }
  }

  #queueTrouble(what: string, queue: string, error: unknown): Error {
    if (error instanceof Error && errorCodeOf(error) !== undefined) return error
    if (replyCode(error) === 404) {
      return new AceMqError(`queue '${queue}' does not exist on ${this.description}`, {
        code: ErrorCodes.NOT_FOUND,
        cause: error,
      })
    }
    return this.#connectionTrouble(what, error)
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

  async #shutdown(): Promise<void> {
    this.#phase = 'closed'
    this.#blockedReason = undefined
    for (const lane of Object.values(this.#lanes)) {
      const publisher = lane.publisher
      lane.publisher = undefined
      publisher?.failAll(
        new PublishFailedError(
          `the transport to ${this.description} was closed before the broker confirmed the message, so it may or may not have been delivered`,
        ),
      )
      lane.permits.rejectWaiters(this.#closedError())
    }
    this.#wake()
    await this.#getter.close()
    const subscriptions = [...this.#subscriptions]
    this.#subscriptions.clear()
    await Promise.allSettled(subscriptions.map((subscription) => subscription.close()))
    await Promise.allSettled([this.#publishConnection.close(), this.#consumeConnection.close()])
    this.#reportedOpen = false
    this.#emit({ type: 'closed' })
  }

  #isOpen(): boolean {
    return (
      this.#phase === 'connected' &&
      this.#publishConnection.isOpen &&
      this.#consumeConnection.isOpen
    )
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

  #warnOnce(key: string, message: string): void {
    if (this.#warnedOnce.has(key)) return
    this.#warnedOnce.add(key)
    this.#warn(message)
  }

  #wake(): void {
    const waiters = [...this.#waiters]
    this.#waiters.clear()
    for (const wake of waiters) wake()
  }

  /** Waits for any change that may let a publish proceed (or fail): unblock, drain, channel, loss, close. */
  #waitForChange(signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal))
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters.delete(wake)
        reject(abortError(signal))
      }
      const wake = (): void => {
        signal?.removeEventListener('abort', onAbort)
        resolve()
      }
      this.#waiters.add(wake)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  #closedError(): PublishFailedError {
    return new PublishFailedError(
      `the transport to ${this.description} is closed: the message was not sent`,
    )
  }

  #assertCanPublish(): void {
    if (this.#phase === 'closed') throw this.#closedError()
    if (this.#phase !== 'connected') {
      throw new PublishFailedError(
        `the transport to ${this.description} is not connected yet (call connect() first): the message was not sent`,
      )
    }
    if (!this.#publishConnection.isOpen) {
      throw new PublishFailedError(
        `the connection to ${this.description} is down and recovering: the message was not sent`,
      )
    }
  }

  #usableConsumeModel(what: string): ChannelModel {
    if (this.#phase === 'closed') {
      throw new ClosedError(`the transport to ${this.description} is closed: cannot ${what}`)
    }
    if (this.#phase !== 'connected') {
      throw new AceMqError(
        `the transport to ${this.description} is not connected yet (call connect() first): cannot ${what}`,
        { code: ErrorCodes.NOT_CONNECTED },
      )
    }
    const model = this.#consumeConnection.model
    if (!this.#consumeConnection.isOpen || model === undefined) {
      throw new AceMqError(
        `the connection to ${this.description} is down and recovering: cannot ${what}`,
        { code: ErrorCodes.CONNECTION_DOWN },
      )
    }
    return model
  }

  #connectionTrouble(what: string, error: unknown): AceMqError {
    if (this.#phase === 'closed') {
      return new ClosedError(`the transport to ${this.description} was closed: ${what}`)
    }
    return new AceMqError(`${what} on ${this.description}: ${describeError(error)}`, {
      code: ErrorCodes.CONNECTION_DOWN,
      cause: error,
    })
  }

  async #openChannel(model: ChannelModel): Promise<Channel> {
    const channel = await model.createChannel()
    channel.on('error', () => undefined)
    channel.on('handler-error', (error: Error, event: string) =>
      this.#warn(
        `a listener for a declaration channel's '${event}' event threw: ${describeError(error)}`,
      ),
    )
    return channel
  }

  #remember(declaration: Declaration): void {
    const key = declarationKey(declaration)
    if (this.#declarationKeys.has(key)) return
    this.#declarationKeys.add(key)
    this.#declarations.push(declaration)
  }

  /**
   * Declares everything remembered, in order. A declaration the broker now refuses is reported
   * and skipped (the rest still matter); a lost connection aborts the replay.
   */
  async #replayDeclarations(model: ChannelModel): Promise<void> {
    let channel: Channel | undefined
    try {
      for (const declaration of [...this.#declarations]) {
        channel ??= await this.#openChannel(model)
        try {
          await applyDeclaration(channel, declaration)
        } catch (error) {
          if (replyCode(error) === undefined || this.#consumeConnection.model !== model) throw error
          this.#warn(`${declarationFailed(declaration, error).message} (while re-declaring)`)
          // The refusal closed the channel.
          channel = undefined
        }
      }
    } finally {
      if (channel !== undefined) await closeChannelQuietly(channel)
    }
  }

  async #setUpConsumeConnection(model: ChannelModel): Promise<void> {
    if (!keepHeaderTables(model)) {
      this.#warnOnce(
        'amqplib internals',
        'this amqplib is not one whose frame reader the transport knows (2.x): copies of deliveries keep header values but not their integer widths',
      )
    }
    if (this.#declarations.length > 0) await this.#replayDeclarations(model)
    const subscriptions = [...this.#subscriptions]
    await Promise.all(subscriptions.map((subscription) => subscription.reattach(model)))
  }

  /** Opens both lanes' confirm channels on a fresh publish connection. */
  async #openPublisher(model: ChannelModel): Promise<void> {
    // A new connection may meet a broker that lost exchanges (a restart): check them again.
    this.#knownExchanges.clear()
    await Promise.all(Object.values(this.#lanes).map((lane) => this.#openLane(lane, model)))
  }

  async #openLane(lane: PublishLane, model: ChannelModel): Promise<void> {
    const channel = await model.createConfirmChannel()
    const publisher: ConfirmPublisher = new ConfirmPublisher(channel, this.description, {
      settled: () => lane.permits.release(),
      drained: () => this.#wake(),
      closed: (error) => this.#publisherClosed(lane, publisher, model, error),
      warn: (message) => this.#warn(message),
    })
    lane.publisher = publisher
    this.#wake()
  }

  /** A lane's channel closed: reopen it if its connection is still up (a channel error). */
  #publisherClosed(
    lane: PublishLane,
    publisher: ConfirmPublisher,
    model: ChannelModel,
    error: Error | undefined,
  ): void {
    if (replyCode(error) === 404) {
      // An exchange seen before is gone: forget it (or, not knowing which, every one).
      const missing = missingExchange(error)
      if (missing === undefined) this.#knownExchanges.clear()
      else this.#knownExchanges.delete(missing)
    }
    if (lane.publisher !== publisher) return
    lane.publisher = undefined
    this.#wake()
    // A lost connection closes its channels before it reports itself closed: look again once
    // that has happened, and reopen only on a connection that is still up.
    setImmediate(() => {
      if (
        this.#phase === 'closed' ||
        lane.opening ||
        lane.publisher !== undefined ||
        !this.#publishConnection.isOpen ||
        this.#publishConnection.model !== model
      ) {
        return
      }
      lane.opening = true
      this.#openLane(lane, model)
        .catch((reopenError: unknown) => {
          this.#warn(
            `could not reopen the ${lane.name} publish channel, so the publish connection is recycled: ${describeError(reopenError)}`,
          )
          if (this.#publishConnection.model === model) void closeModelQuietly(model)
        })
        .finally(() => {
          lane.opening = false
          this.#wake()
        })
    })
  }

  #publishConnectionLost(error: Error | undefined, willRecover: boolean): void {
    for (const lane of Object.values(this.#lanes)) {
      const publisher = lane.publisher
      lane.publisher = undefined
      publisher?.failAll(
        new PublishFailedError(
          `the connection to ${this.description} was lost before the broker confirmed the message, so it may or may not have been delivered`,
          error === undefined ? {} : { cause: this.#safeError(error) },
        ),
      )
    }
    this.#refreshOpen(error)
    // A blocked state belongs to the lost connection; the broker tells a new one again.
    if (this.#blockedReason !== undefined) {
      this.#blockedReason = undefined
      this.#emit({ type: 'unblocked' })
    }
    this.#wake()
    if (!willRecover) void this.close()
  }

  #blocked(reason: string): void {
    if (this.#phase === 'closed') return
    const changed = this.#blockedReason !== reason
    this.#blockedReason = reason
    if (changed) this.#emit({ type: 'blocked', reason })
  }

  #unblocked(): void {
    if (this.#blockedReason === undefined) return
    this.#blockedReason = undefined
    this.#emit({ type: 'unblocked' })
    this.#wake()
  }
}

function validateMessage(message: OutgoingMessage): void {
  if (typeof message !== 'object' || message === null) {
    throw new ConfigurationError(`message must be an object; got ${String(message)}`)
  }
  if (typeof message.exchange !== 'string') {
    throw new ConfigurationError(
      `message.exchange must be a string; got ${typeof message.exchange}`,
    )
  }
  if (typeof message.routingKey !== 'string') {
    throw new ConfigurationError(
      `message.routingKey must be a string; got ${typeof message.routingKey}`,
    )
  }
  if (!(message.body instanceof Uint8Array)) {
    throw new ConfigurationError(
      `message.body must be a Uint8Array (or Buffer); got ${typeof message.body}`,
    )
  }
  if (typeof message.headers !== 'object' || message.headers === null) {
    throw new ConfigurationError(
      `message.headers must be an object; got ${String(message.headers)}`,
    )
  }
  if (typeof message.properties !== 'object' || message.properties === null) {
    throw new ConfigurationError(
      `message.properties must be an object; got ${String(message.properties)}`,
    )
  }
}

/** `promise`, given up (with an `AbortError`) when `signal` aborts first. */
function withSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise
  if (signal.aborted) return Promise.reject(abortError(signal))
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal))
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error as Error)
      },
    )
  })
}
