import { CodecRegistry } from './codec/codec-registry.js'
import { DEFAULT_DRAIN_TIMEOUT } from './constants.js'
import { closeSequence } from './connection/close-sequence.js'
import {
  connectionScheduler,
  messagingHost,
  orderedHost,
  outboxRelayHost,
  pipelineHost,
  publisherHost,
  replayHost,
} from './connection/connection-hosts.js'
import { ConnectionState } from './connection/connection-state.js'
import { drainConsumers } from './connection/drain-consumers.js'
import type { ConsumerOptions } from './consumer/consumer-options.js'
import type { Consumer } from './consumer/consumer.js'
import { assertInterceptor, withInterceptor, type Interceptor } from './consumer/interceptor.js'
import { deadLetterWarning, type OnDeadLetter } from './consumer/dead-letter.js'
import type { Handler } from './consumer/message.js'
import { toMillis, type Duration } from './duration.js'
import { defaultOrigin } from './envelope/envelope.js'
import { ConfigurationError } from './errors.js'
import { warningReporter } from './internal/warning-reporter.js'
import type { HealthContributor, HealthResult } from './health/health.js'
import { aggregateHealth } from './health/health-aggregation.js'
import { OutboxRelay, type OutboxRelayOptions } from './outbox/outbox-relay.js'
import type { OutboxStore } from './outbox/outbox-store.js'
import { Publisher, type PublisherOptions } from './publisher/publisher.js'
import { orderedRegistry } from './ordered/ordered-host.js'
import { OrderedQueueBuilder, type OrderedQueue } from './ordered/ordered-queue.js'
import { PipelineBuilder } from './pipeline/pipeline-builder.js'
import { Replay } from './replay/replay.js'
import type { Scheduler } from './scheduler/scheduler.js'
import { Requester, type RequesterOptions } from './request-reply/requester.js'
import { Responder, type RespondHandler, type RespondOptions } from './request-reply/responder.js'
import type { Instrumentation } from './telemetry/instrumentation.js'
import { safeInstrumentation } from './telemetry/safe-instrumentation.js'
import type { Topology } from './topology/topology.js'
import type { Transport } from './transport/transport.js'

/** Options for {@link AceMq.connect}. */
export interface AceMqOptions {
  /** Codecs by content type (default: JSON, text, bytes). */
  readonly codecs?: CodecRegistry
  /** `x-acemq-origin` for messages published here (default `acemq@{hostname}`). */
  readonly origin?: string
  /**
   * Told about failures the engine recovered from on its own (a store that could not answer,
   * a move that is held and tried again, a lost connection). Default: each distinct failure
   * is printed as a process warning (`AceMqWarning`), at most once a minute with the count of
   * repeats held back. Pass your logger here (`(error, context) => log.warn(...)`).
   */
  readonly onError?: (error: unknown, context: string) => void
  /**
   * Told of every message a consumer of this connection moves to `{queue}.dlq` or
   * `{queue}.parked` (a consumer's `withOnDeadLetter` takes its place for that consumer).
   * Default: each is reported to `onError` as an `ACEMQ_DEAD_LETTERED` error, so with no
   * `onError` a warning is printed, one line per reason at most once a minute.
   */
  readonly onDeadLetter?: OnDeadLetter
}

/** Options for {@link AceMq.close}. */
export interface CloseOptions {
  /**
   * How long to wait for running handlers before aborting their signals (default 20 s).
   * `0` does not drain: handlers are aborted at once and get the 5 s grace below.
   */
  readonly drainTimeout?: Duration
}

/**
 * A connection to a broker through a {@link Transport}: publishers, consumers, topology,
 * pause and drain, health and shutdown. Get one from `connect()` in
 * `@acemq/transport-amqp`, or from `AceMq.connect(new InMemoryTransport())`.
 *
 * @example
 * ```ts
 * await using mq = await AceMq.connect(new InMemoryTransport())
 * await mq.applyTopology(Topology.define().queueWithRetry('orders.placed', policy))
 * await mq.consume('orders.placed', ConsumerOptions.defaults().withRetry(policy), handle)
 * await mq.publisher('', 'orders.placed').send({ id: 'o-1' })
 * ```
 */
export class AceMq implements AsyncDisposable {
  /** The transport underneath. */
  readonly transport: Transport
  readonly #state: ConnectionState
  #installedInstrumentation: Instrumentation | undefined
  #unsubscribe: () => void

  private constructor(transport: Transport, options: AceMqOptions) {
    this.transport = transport
    const onDeadLetter: OnDeadLetter =
      options.onDeadLetter ??
      ((report) => {
        const { error, context } = deadLetterWarning(report)
        this.#state.reportError(error, context)
      })
    this.#state = new ConnectionState(
      transport,
      options.codecs ?? CodecRegistry.defaults(),
      options.origin ?? defaultOrigin(),
      options.onError ?? warningReporter(),
      onDeadLetter,
    )
    this.#unsubscribe = transport.onEvent((event) => this.#state.onTransportEvent(event))
  }

  /**
   * Connects through `transport` and returns the connection.
   *
   * @example
   * ```ts
   * const mq = await AceMq.connect(new InMemoryTransport(), { origin: 'orders@web-1' })
   * ```
   */
  static async connect(transport: Transport, options: AceMqOptions = {}): Promise<AceMq> {
    if (
      typeof transport !== 'object' ||
      transport === null ||
      typeof transport.publish !== 'function'
    ) {
      throw new ConfigurationError(
        `AceMq.connect(transport) needs a Transport; got ${String(transport)}`,
      )
    }
    if (options.onDeadLetter !== undefined && typeof options.onDeadLetter !== 'function') {
      throw new ConfigurationError(
        `AceMq.connect(options.onDeadLetter) must be a function; got ${String(options.onDeadLetter)}`,
      )
    }
    if (options.codecs !== undefined && !(options.codecs instanceof CodecRegistry)) {
      throw new ConfigurationError('AceMq.connect(options.codecs) must be a CodecRegistry')
    }
    if (
      options.origin !== undefined &&
      (typeof options.origin !== 'string' || options.origin === '')
    ) {
      throw new ConfigurationError(
        `AceMq.connect(options.origin) must be a non-empty string; got ${JSON.stringify(options.origin)}`,
      )
    }
    const mq = new AceMq(transport, options)
    await transport.connect()
    return mq
  }

  /** Handlers running now, across every consumer, counted until their settlement is done. */
  get inFlight(): number {
    return this.#state.inFlight
  }

  /** Deliveries waiting at the pause gate, never handed to a handler. */
  get held(): number {
    let held = 0
    for (const consumer of this.#state.consumers) held += consumer.held
    return held
  }

  /**
   * Deliveries waiting out a delay while they hold their place in the prefetch window (a retry
   * wait in the consumer, an in-progress or store-failure put-back, a move tried again). They
   * occupy no handler and are not counted in {@link inFlight}; a drain hands the first three
   * back at once.
   */
  get waiting(): number {
    let waiting = 0
    for (const consumer of this.#state.consumers) waiting += consumer.waiting
    return waiting
  }

  /** Whether {@link pauseConsuming} is in effect. */
  get consumingPaused(): boolean {
    return this.#state.consumingPaused
  }

  /** Whether {@link pausePublishing} is in effect. */
  get publishingPaused(): boolean {
    return this.#state.publishingPaused
  }

  /** Whether the connection is closing or closed. */
  get closed(): boolean {
    return this.#state.closing !== undefined
  }

  /**
   * Adds an interceptor to every consumer and publisher of this connection, those made before
   * it too (docs/design.md §22): consume members run around each handler, publish members
   * around each send, all in ascending `order`.
   *
   * @example
   * ```ts
   * mq.intercept({ name: 'audit', afterHandle: (message, ack) => log.info(message.envelope.id, ack.kind) })
   * ```
   */
  intercept(interceptor: Interceptor): void {
    assertInterceptor(interceptor, 'intercept(interceptor)')
    this.#state.interceptors = withInterceptor(this.#state.interceptors, interceptor)
  }

  /**
   * Installs the telemetry seam (`@acemq/otel` calls this); `undefined` removes it. Returns
   * the instrumentation it replaced. Whatever the instrumentation throws is reported to
   * `onError` and never fails a message or a publish.
   *
   * @example
   * ```ts
   * mq.setInstrumentation(myInstrumentation)
   * ```
   */
  setInstrumentation(instrumentation: Instrumentation | undefined): Instrumentation | undefined {
    const previous = this.#installedInstrumentation
    this.#installedInstrumentation = instrumentation
    this.#state.instrumentation =
      instrumentation &&
      safeInstrumentation(instrumentation, (error, context) =>
        this.#state.reportError(error, context),
      )
    return previous
  }

  /** The instrumentation installed with {@link setInstrumentation}, if any. */
  get instrumentation(): Instrumentation | undefined {
    return this.#installedInstrumentation
  }

  /**
   * A publisher for one exchange and routing key (`''` is the default exchange, which routes
   * to the queue named by the routing key).
   *
   * @example
   * ```ts
   * await mq.publisher<OrderPlaced>('orders', 'order.placed').send({ id: 'o-1' })
   * ```
   */
  publisher<T = unknown>(
    exchange: string,
    routingKey: string,
    options: PublisherOptions = {},
  ): Publisher<T> {
    return new Publisher<T>(publisherHost(this.#state), exchange, routingKey, options)
  }

  /**
   * Declares the failure topology for `queue` (`acemq.dlx`, `{queue}.dlq`, `{queue}.parked`
   * and the policy's rungs), then subscribes `handler`. The queue itself must exist: declare
   * it with {@link applyTopology}.
   *
   * @example
   * ```ts
   * const consumer = await mq.consume<OrderPlaced>('orders.placed',
   *   ConsumerOptions.defaults().withRetry(RetryPolicy.exponential(5, '1s', '1m')),
   *   async (message) => { await ship(message.payload) })
   * ```
   */
  async consume<T = unknown>(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<T>,
  ): Promise<Consumer> {
    return this.#state.consume(queue, options, handler)
  }

  /**
   * A requester: `request(exchange, routingKey, payload)` resolves to the reply's payload
   * (docs/design.md §24). Its reply queue is declared on the first request.
   *
   * @example
   * ```ts
   * const price = await mq.requester().request<Quote, Price>('', 'pricing', { sku: 'a-1' })
   * ```
   */
  requester(options: RequesterOptions = {}): Requester {
    this.#state.assertOpen()
    return new Requester(messagingHost(this.#state), options)
  }

  /**
   * Answers requests on `queue` (which must exist): `handler`'s return value is the reply,
   * published (confirmed) to the request's reply address before the request is acked. The
   * responder is an ordinary consumer: retries, idempotency, drain and close apply.
   *
   * @example
   * ```ts
   * await mq.respond<Quote, Price>('pricing', {}, async (message) => price(message.payload))
   * ```
   */
  async respond<TReq = unknown, TRes = unknown>(
    queue: string,
    options: RespondOptions,
    handler: RespondHandler<TReq, TRes>,
  ): Promise<Responder> {
    return new Responder(queue).start(messagingHost(this.#state), options ?? {}, handler)
  }

  /**
   * The connection's scheduler (one per connection): `in(delay, …)` and `at(date, …)` put a
   * message on the family's TTL ladder; `startDelivering()` runs a control consumer here
   * (docs/design.md §25).
   *
   * @example
   * ```ts
   * await mq.scheduler().in('10m', '', 'invoices.remind', { invoice: 'i-1' })
   * ```
   */
  scheduler(): Scheduler {
    return connectionScheduler(this.#state)
  }

  /**
   * The transactional outbox's relay on `store`: call `start()` to relay in the background
   * (and register the `outbox` health report), or `drainOnce()` to relay what is pending now.
   * Closing the connection stops a started relay once its round is done.
   *
   * @example
   * ```ts
   * const relay = mq.outbox(new KyselyOutboxStore(db), { batch: 100, poll: '1s', lease: '30s' })
   * relay.start()
   * ```
   */
  outbox(store: OutboxStore, options: OutboxRelayOptions = {}): OutboxRelay {
    this.#state.assertOpen()
    return new OutboxRelay(outboxRelayHost(this.#state), store, options)
  }

  /**
   * Replays a dead-letter (or parked) queue: into the queue its name comes from unless
   * `.into(queue)` says otherwise. Each message is republished (confirmed, mandatory) before
   * it is removed from the source.
   *
   * @example
   * ```ts
   * await mq.replay('orders.placed.dlq').replayAll()
   * ```
   */
  replay(queue: string): Replay {
    return new Replay(replayHost(this.#state), queue)
  }

  /**
   * Describes an ordered queue: messages with the same key are handled one at a time, in the
   * order they were sent, on the key's partition `{name}.{p}`; the partitions run in parallel.
   * `declare()` checks the broker, declares the partitions and registers `ordered:{name}` in
   * health.
   *
   * @example
   * ```ts
   * const ledger = await mq.ordered<Entry>('ledger')
   *   .partitions(8)
   *   .keyedBy((entry) => entry.account)
   *   .onFailure('stop', { attempts: 3, delay: '1s' })
   *   .declare()
   * await ledger.send({ account: 'acct-7', amount: 10 })
   * await ledger.consume(async (message) => { await book(message.payload) })
   * ```
   */
  ordered<T = unknown>(name: string): OrderedQueueBuilder<T> {
    return new OrderedQueueBuilder<T>(orderedHost(this.#state, this), name)
  }

  /** The ordered queues declared on this connection, each reporting `ordered:{name}` in health. */
  get orderedQueues(): readonly OrderedQueue<unknown>[] {
    const queues: OrderedQueue<unknown>[] = []
    for (const queue of orderedRegistry(this).values()) {
      if (queue !== null) queues.push(queue as OrderedQueue<unknown>)
    }
    return queues
  }

  /**
   * Describes a pipeline: steps on queues `{name}.{step}`, each step's result published
   * (confirmed) to the next step's queue before its delivery is acked. `build()` declares the
   * step queues and starts the steps.
   *
   * @example
   * ```ts
   * const checkout = await mq.pipeline<Order>('checkout')
   *   .step('reserve', async (order) => ({ ...order, reserved: true }))
   *   .step('charge', async (order) => (order.total > 0 ? order : null))
   *   .step('ship', async (order) => order)
   *   .idempotent(store)
   *   .build()
   * await checkout.send(order, { id: order.id })
   * ```
   */
  pipeline<T = unknown>(name: string): PipelineBuilder<T> {
    return new PipelineBuilder<T>(pipelineHost(this.#state, this), name)
  }

  /**
   * Declares everything in `topology`, in order.
   *
   * @example
   * ```ts
   * await mq.applyTopology(Topology.define().queueWithRetry('orders.placed', policy))
   * ```
   */
  async applyTopology(topology: Topology): Promise<void> {
    this.#state.assertOpen()
    await this.transport.declare(topology.plan())
  }

  /** Stops handing deliveries to handlers; they wait at the gate (`held`), never acked. */
  pauseConsuming(): void {
    this.#state.pauseConsuming()
  }

  /** Hands the held deliveries over and carries on. */
  resumeConsuming(): void {
    if (this.#state.closing !== undefined) return
    this.#state.consumingPaused = false
    for (const consumer of this.#state.consumers) consumer.pump()
  }

  /** Further publishes reject with `PublishingPausedError`; the engine's own moves still work. */
  pausePublishing(): void {
    this.#state.publishingPaused = true
  }

  /** Lets publishes through again. */
  resumePublishing(): void {
    this.#state.publishingPaused = false
  }

  /**
   * Pauses consuming and waits for the handlers that are running to finish and settle.
   * Resolves `true` when they all did, `false` at the timeout (it never throws for time);
   * rejects with an `AbortError` when `signal` aborts (at once, before pausing, when it
   * already has). Consuming stays paused either way. Called from inside a handler, it does
   * not wait for that handler.
   *
   * @example
   * ```ts
   * const finished = await mq.drainConsumers('30s', stoppingSignal)
   * ```
   */
  async drainConsumers(timeout: Duration, signal?: AbortSignal): Promise<boolean> {
    const timeoutMs = toMillis(timeout, 'drainConsumers(timeout)')
    return drainConsumers(this.#state, timeoutMs, signal)
  }

  /**
   * The connection's health: the `connection` report plus every registered contributor,
   * aggregated to the worst status. A blocked broker is `UP` with the reason (back pressure
   * is not a failure); a connection being recovered is `DEGRADED`; only a closed connection
   * is `DOWN`. No broker round trip.
   *
   * @example
   * ```ts
   * const { status, reports } = await mq.health()
   * ```
   */
  async health(): Promise<HealthResult> {
    return aggregateHealth(
      {
        transport: this.transport,
        inFlight: this.#state.inFlight,
        held: this.held,
        consumingPaused: this.#state.consumingPaused,
        publishingPaused: this.#state.publishingPaused,
        closing: this.#state.closing !== undefined,
      },
      [...this.#state.consumers],
      this.#state.contributors,
    )
  }

  /**
   * Adds a health contributor; returns a function that removes it. One that throws or takes
   * longer than 5 s is reported `DOWN` with the error.
   *
   * @example
   * ```ts
   * mq.registerHealth({ name: 'billing', report: () => ({ name: 'billing', status: 'UP', details: {} }) })
   * ```
   */
  registerHealth(contributor: HealthContributor): () => void {
    return this.#state.contributors.register(contributor)
  }

  /**
   * Drains (up to `drainTimeout`, default 20 s), then closes: consumers are cancelled, held
   * deliveries and retry or in-progress waits are handed back at once, handlers still running
   * after the drain have their signals aborted and 5 s more, and then channels and the
   * connection close regardless; an ack from a handler that outlived the close is dropped.
   * Safe to call twice.
   *
   * @example
   * ```ts
   * await mq.close({ drainTimeout: '10s' })
   * ```
   */
  close(options: CloseOptions = {}): Promise<void> {
    const drainTimeoutMs = toMillis(
      options.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT,
      'close(drainTimeout)',
    )
    // Asked now, for the caller: is it one of this connection's running handlers?
    const state = this.#state
    const caller = state.currentTask.getStore()
    const inside = caller !== undefined && caller.consumer.isRunning(caller)
    if (inside && !state.closers.has(caller)) {
      state.closers.add(caller)
      state.enterInside(caller)
    }
    state.closing ??= this.#close(drainTimeoutMs)
    // From inside a handler, waiting for the whole close would wait for that handler itself:
    // the caller is answered once every other handler has drained, and the close goes on
    // (its channel closing after the caller's handler has settled, so its ack is written).
    return inside ? state.othersDrained.promise : state.closing
  }

  /** `await using mq = ...` closes with the default drain. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  #close(drainTimeoutMs: number): Promise<void> {
    const state = this.#state
    return closeSequence(
      {
        consumers: state.consumers,
        relays: state.relays,
        inside: state.inside,
        pauseConsuming: () => {
          state.consumingPaused = true
          state.scheduler?.connectionClosing()
        },
        othersDrained: () => state.othersDrained.resolve(),
        endPublishing: () => {
          state.publishingClosed = true
          state.closingController.abort()
        },
        closeTransport: () => this.transport.close(),
        finished: () => {
          this.#unsubscribe()
          // Drains still waiting (for handlers given up on) get their answer: not everything
          // finished.
          for (const finish of [...state.pendingDrains]) finish(false)
          // On Node 20 an enabled AsyncLocalStorage stays in a process-wide list that every new
          // promise walks, until it is disabled: a closed connection must not cost them anything.
          state.currentTask.disable()
        },
      },
      drainTimeoutMs,
    )
  }
}
