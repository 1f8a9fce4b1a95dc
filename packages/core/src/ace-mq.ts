import { AsyncLocalStorage } from 'node:async_hooks'
import { CodecRegistry } from './codec/codec-registry.js'
import { DEFAULT_DRAIN_TIMEOUT } from './constants.js'
import { ConsumerOptions } from './consumer/consumer-options.js'
import { closeSequence } from './connection/close-sequence.js'
import type { Consumer } from './consumer/consumer.js'
import { ConsumerEngine } from './consumer/consumer-engine.js'
import type { ConsumerHost, TaskSet } from './consumer/consumer-host.js'
import type { DeliveryTask } from './consumer/delivery-task.js'
import type { DeliveryHook } from './consumer/delivery-hook.js'
import { assertInterceptor, withInterceptor, type Interceptor } from './consumer/interceptor.js'
import { deadLetterWarning, type OnDeadLetter } from './consumer/dead-letter.js'
import type { Handler } from './consumer/message.js'
import { toMillis, type Duration } from './duration.js'
import { defaultOrigin } from './envelope/envelope.js'
import { AceMqError, ClosedError, ConfigurationError, abortError } from './errors.js'
import { ErrorCodes, errorCodeOf } from './error-codes.js'
import { deferred, sleep, type Deferred } from './internal/timers.js'
import { warningReporter } from './internal/warning-reporter.js'
import type { HealthContributor, HealthResult } from './health/health.js'
import { HealthContributors, aggregateHealth } from './health/health-aggregation.js'
import { OutboxRelay, type OutboxRelayOptions } from './outbox/outbox-relay.js'
import type { OutboxStore } from './outbox/outbox-store.js'
import { Publisher, type PublisherHost, type PublisherOptions } from './publisher/publisher.js'
import { orderedRegistry, type OrderedHost } from './ordered/ordered-host.js'
import { OrderedQueueBuilder, type OrderedQueue } from './ordered/ordered-queue.js'
import { PipelineBuilder } from './pipeline/pipeline-builder.js'
import type { PipelineHost } from './pipeline/pipeline-host.js'
import { Replay } from './replay/replay.js'
import type { MessagingHost } from './publisher/messaging-host.js'
import { Scheduler } from './scheduler/scheduler.js'
import { Requester, type RequesterOptions } from './request-reply/requester.js'
import { Responder, type RespondHandler, type RespondOptions } from './request-reply/responder.js'
import { validateQueueName } from './retry/queue-names.js'
import type { Instrumentation } from './telemetry/instrumentation.js'
import { safeInstrumentation } from './telemetry/safe-instrumentation.js'
import { consumerDeclarations, type Topology } from './topology/topology.js'
import type { Transport, TransportEvent } from './transport/transport.js'

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
  readonly #codecs: CodecRegistry
  readonly #origin: string
  readonly #onError: ((error: unknown, context: string) => void) | undefined
  readonly #onDeadLetter: OnDeadLetter
  readonly #consumers = new Set<ConsumerEngine<unknown>>()
  /** `mq.intercept()`'s, by order; replaced (never changed) at each call. */
  #interceptors: readonly Interceptor[] = []
  readonly #contributors = new HealthContributors()
  readonly #currentTask = new AsyncLocalStorage<DeliveryTask | undefined>()
  readonly #closingController = new AbortController()
  readonly #idleWaiters = new Set<() => void>()
  /** Outbox relays started on this connection: closing stops them after their round. */
  readonly #relays = new Set<OutboxRelay>()
  /** What the engine calls: the installed instrumentation, guarded so it cannot fail a message. */
  #instrumentation: Instrumentation | undefined
  #installedInstrumentation: Instrumentation | undefined
  #inFlight = 0
  #consumingPaused = false
  #publishingPaused = false
  #closing: Promise<void> | undefined
  /** Set once closing has drained: publishes started after this are refused. */
  #publishingClosed = false
  #unsubscribe: () => void

  private constructor(transport: Transport, options: AceMqOptions) {
    this.transport = transport
    this.#codecs = options.codecs ?? CodecRegistry.defaults()
    this.#origin = options.origin ?? defaultOrigin()
    this.#onError = options.onError ?? warningReporter()
    this.#onDeadLetter =
      options.onDeadLetter ??
      ((report) => {
        const { error, context } = deadLetterWarning(report)
        this.#reportError(error, context)
      })
    this.#unsubscribe = transport.onEvent((event) => this.#onTransportEvent(event))
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
    return this.#inFlight
  }

  /** Deliveries waiting at the pause gate, never handed to a handler. */
  get held(): number {
    let held = 0
    for (const consumer of this.#consumers) held += consumer.held
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
    for (const consumer of this.#consumers) waiting += consumer.waiting
    return waiting
  }

  /** Whether {@link pauseConsuming} is in effect. */
  get consumingPaused(): boolean {
    return this.#consumingPaused
  }

  /** Whether {@link pausePublishing} is in effect. */
  get publishingPaused(): boolean {
    return this.#publishingPaused
  }

  /** Whether the connection is closing or closed. */
  get closed(): boolean {
    return this.#closing !== undefined
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
    this.#interceptors = withInterceptor(this.#interceptors, interceptor)
  }

  setInstrumentation(instrumentation: Instrumentation | undefined): Instrumentation | undefined {
    const previous = this.#installedInstrumentation
    this.#installedInstrumentation = instrumentation
    this.#instrumentation =
      instrumentation &&
      safeInstrumentation(instrumentation, (error, context) => this.#reportError(error, context))
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
    return new Publisher<T>(this.#publisherHost, exchange, routingKey, options)
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
    validateQueueName(queue, 'consume(queue)')
    if (!(options instanceof ConsumerOptions)) {
      throw new ConfigurationError(
        'consume(options) must be a ConsumerOptions, e.g. ConsumerOptions.defaults()',
      )
    }
    if (typeof handler !== 'function') {
      throw new ConfigurationError(`consume(handler) must be a function; got ${String(handler)}`)
    }
    this.#assertOpen()
    // A queue that is not there (a misspelt name) is refused before anything is declared for
    // it: a failed consume must leave no {queue}.dlq, .parked or rung behind.
    await this.transport.queueLength?.(queue).catch((error: unknown) => {
      throw errorCodeOf(error) === ErrorCodes.NOT_FOUND
        ? new AceMqError(
            `consume(queue): queue '${queue}' does not exist; declare it first (applyTopology)`,
            { code: ErrorCodes.NOT_FOUND, cause: error },
          )
        : error
    })
    await this.transport.declare(consumerDeclarations(queue, options.retryPolicy))
    const consumer = new ConsumerEngine<T>(this.#consumerHost, queue, options, handler)
    this.#consumers.add(consumer as ConsumerEngine<unknown>)
    try {
      await consumer.start()
    } catch (error) {
      this.#consumers.delete(consumer as ConsumerEngine<unknown>)
      throw error
    }
    return consumer
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
    this.#assertOpen()
    return new Requester(this.#messagingHost, options)
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
    return new Responder(queue).start(this.#messagingHost, options ?? {}, handler)
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
    this.#assertOpen()
    this.#scheduler ??= new Scheduler(this.#messagingHost)
    return this.#scheduler
  }

  #scheduler: Scheduler | undefined

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
    this.#assertOpen()
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const mq = this
    return new OutboxRelay(
      {
        transport: this.transport,
        origin: this.#origin,
        get instrumentation() {
          return mq.#instrumentation
        },
        get publishingPaused() {
          return mq.#publishingPaused
        },
        get closed() {
          return mq.#closing !== undefined
        },
        registerHealth: (contributor) => this.registerHealth(contributor),
        reportError: (error, context) => this.#reportError(error, context),
        relayStarted: (relay) => this.#relays.add(relay),
        relayStopped: (relay) => this.#relays.delete(relay),
      },
      store,
      options,
    )
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
    return new Replay(
      {
        transport: this.transport,
        codecs: this.#codecs,
        assertOpen: () => this.#assertOpen(),
      },
      queue,
    )
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
    return new OrderedQueueBuilder<T>(this.#orderedHost, name)
  }

  /** The ordered queues declared on this connection, each reporting `ordered:{name}` in health. */
  get orderedQueues(): readonly OrderedQueue<unknown>[] {
    const queues: OrderedQueue<unknown>[] = []
    for (const queue of orderedRegistry(this).values()) {
      if (queue !== null) queues.push(queue as OrderedQueue<unknown>)
    }
    return queues
  }

  get #orderedHost(): OrderedHost {
    return {
      owner: this,
      transport: this.transport,
      publisher: (queue) => this.publisher('', queue),
      registerHealth: (contributor) => this.registerHealth(contributor),
      startConsumer: (queue, options, handler, inPlace) =>
        this.#startEngine(queue, options, handler, inPlace),
      assertOpen: () => this.#assertOpen(),
      reportError: (error, context) => this.#reportError(error, context),
    }
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
    return new PipelineBuilder<T>(this.#pipelineHost, name)
  }

  get #pipelineHost(): PipelineHost {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const mq = this
    return {
      owner: this,
      transport: this.transport,
      codecs: this.#codecs,
      origin: this.#origin,
      get instrumentation() {
        return mq.#instrumentation
      },
      publisher: (exchange, routingKey, reserved) =>
        new Publisher(this.#publisherHost, exchange, routingKey, {}, reserved),
      registerHealth: (contributor) => this.registerHealth(contributor),
      startConsumer: (queue, options, handler, step) =>
        this.#startEngine(queue, options, handler, step),
      assertOpen: () => this.#assertOpen(),
    }
  }

  /** Starts an engine consumer with an ordered queue's or a pipeline step's hook. */
  async #startEngine(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<unknown>,
    hook: DeliveryHook,
  ): Promise<Consumer> {
    this.#assertOpen()
    const consumer = new ConsumerEngine(this.#consumerHost, queue, options, handler, hook)
    this.#consumers.add(consumer)
    try {
      await consumer.start()
    } catch (error) {
      this.#consumers.delete(consumer)
      throw error
    }
    return consumer
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
    this.#assertOpen()
    await this.transport.declare(topology.plan())
  }

  /** Stops handing deliveries to handlers; they wait at the gate (`held`), never acked. */
  pauseConsuming(): void {
    this.#consumingPaused = true
    for (const consumer of this.#consumers) consumer.paused()
  }

  /** Hands the held deliveries over and carries on. */
  resumeConsuming(): void {
    if (this.#closing !== undefined) return
    this.#consumingPaused = false
    for (const consumer of this.#consumers) consumer.pump()
  }

  /** Further publishes reject with `PublishingPausedError`; the engine's own moves still work. */
  pausePublishing(): void {
    this.#publishingPaused = true
  }

  /** Lets publishes through again. */
  resumePublishing(): void {
    this.#publishingPaused = false
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
    // Asked now, for the caller: a drain from inside a handler does not wait for that handler,
    // and only for that one (whichever task happens to finish last).
    const caller = this.#currentTask.getStore()
    if (signal?.aborted) throw abortError(signal)
    const inside = caller !== undefined && caller.consumer.isRunning(caller)
    this.pauseConsuming()
    // Deliveries waiting out a retry or in-progress delay are not running handlers: they go
    // back at once rather than hold the drain open.
    for (const consumer of this.#consumers) consumer.endWaits()
    // While it waits, the caller is no handler any other drain or close should wait for.
    if (inside) this.#enterInside(caller)
    if (this.#busy(this.#inside) === 0) {
      if (inside) this.#leaveInside(caller)
      return true
    }
    return new Promise<boolean>((resolve, reject) => {
      const timer = new AbortController()
      const finish = (result: boolean | Error): void => {
        timer.abort()
        this.#idleWaiters.delete(check)
        this.#pendingDrains.delete(finish)
        if (inside) this.#leaveInside(caller)
        signal?.removeEventListener('abort', onAbort)
        if (result instanceof Error) reject(result)
        else resolve(result)
      }
      const check = (): void => {
        if (this.#busy(this.#inside) === 0) finish(true)
      }
      // A connection that closes first answers it: false, its handlers were given up on.
      this.#pendingDrains.add(finish)
      const onAbort = (): void => finish(abortError(signal))
      // sleep() takes waits past setTimeout's 2^31−1 ms limit in steps.
      void sleep(timeoutMs, timer.signal).then((elapsed) => {
        if (elapsed) finish(false)
      })
      this.#idleWaiters.add(check)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
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
        inFlight: this.#inFlight,
        held: this.held,
        consumingPaused: this.#consumingPaused,
        publishingPaused: this.#publishingPaused,
        closing: this.#closing !== undefined,
      },
      [...this.#consumers],
      this.#contributors,
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
    return this.#contributors.register(contributor)
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
    const caller = this.#currentTask.getStore()
    const inside = caller !== undefined && caller.consumer.isRunning(caller)
    if (inside && !this.#closers.has(caller)) {
      this.#closers.add(caller)
      this.#enterInside(caller)
    }
    this.#closing ??= this.#close(drainTimeoutMs)
    // From inside a handler, waiting for the whole close would wait for that handler itself:
    // the caller is answered once every other handler has drained, and the close goes on
    // (its channel closing after the caller's handler has settled, so its ack is written).
    return inside ? this.#othersDrained.promise : this.#closing
  }

  /** Handlers that called close(). */
  readonly #closers = new Set<DeliveryTask>()
  /**
   * Handlers waiting inside a drain or close of this connection or of one of its consumers, by
   * how many such waits each is in: no drain or close waits for them, so two handlers that
   * drain or close from inside never wait for each other.
   */
  readonly #inside = new Map<DeliveryTask, number>()
  /** The drains still waiting; a close answers them `false` when it is done. */
  readonly #pendingDrains = new Set<(result: boolean) => void>()

  #enterInside(task: DeliveryTask): void {
    this.#inside.set(task, (this.#inside.get(task) ?? 0) + 1)
    // The set of tasks nobody waits for grew: a drain or close may be done now.
    for (const check of [...this.#idleWaiters]) check()
    for (const consumer of this.#consumers) consumer.recheckIdle()
  }

  #leaveInside(task: DeliveryTask): void {
    const left = (this.#inside.get(task) ?? 1) - 1
    if (left > 0) this.#inside.set(task, left)
    else this.#inside.delete(task)
  }
  /** Resolves once closing has drained every handler but the ones that called it. */
  readonly #othersDrained: Deferred<void> = deferred<void>()

  /** `await using mq = ...` closes with the default drain. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  #close(drainTimeoutMs: number): Promise<void> {
    return closeSequence(
      {
        consumers: this.#consumers,
        relays: this.#relays,
        inside: this.#inside,
        pauseConsuming: () => {
          this.#consumingPaused = true
          this.#scheduler?.connectionClosing()
        },
        othersDrained: () => this.#othersDrained.resolve(),
        endPublishing: () => {
          this.#publishingClosed = true
          this.#closingController.abort()
        },
        closeTransport: () => this.transport.close(),
        finished: () => {
          this.#unsubscribe()
          // Drains still waiting (for handlers given up on) get their answer: not everything
          // finished.
          for (const finish of [...this.#pendingDrains]) finish(false)
          // On Node 20 an enabled AsyncLocalStorage stays in a process-wide list that every new
          // promise walks, until it is disabled: a closed connection must not cost them anything.
          this.#currentTask.disable()
        },
      },
      drainTimeoutMs,
    )
  }

  #busy(except: TaskSet): number {
    let busy = 0
    for (const consumer of this.#consumers) busy += consumer.busy(except)
    return busy
  }

  #assertOpen(): void {
    if (this.#closing !== undefined) throw new ClosedError()
  }

  /** Publishes go through until closing has drained the handlers that may be making them. */
  #assertCanPublish(): void {
    if (this.#publishingClosed) throw new ClosedError()
  }

  #reportError(error: unknown, context: string): void {
    try {
      this.#onError?.(error, context)
    } catch {
      // A failing error hook must not take the engine down with it.
    }
  }

  #onTransportEvent(event: TransportEvent): void {
    if (event.type === 'disconnected') {
      for (const consumer of this.#consumers) consumer.connectionLost()
      this.#reportError(
        event.error ?? new AceMqError('connection lost', { code: ErrorCodes.CONNECTION_DOWN }),
        'the connection was lost; recovering',
      )
    }
  }

  get #messagingHost(): MessagingHost {
    // The publisher's view underneath (not spread: its getters are read at use, not now).
    const host: MessagingHost = Object.create(this.#publisherHost) as MessagingHost
    return Object.assign(host, {
      consume: <T>(queue: string, options: ConsumerOptions, handler: Handler<T>) =>
        this.consume(queue, options, handler),
      registerHealth: (contributor: HealthContributor) => this.registerHealth(contributor),
      reportError: (error: unknown, context: string) => this.#reportError(error, context),
    })
  }

  get #publisherHost(): PublisherHost {
    // A view, not a copy: pause flags and instrumentation are read at send time.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const mq = this
    return {
      transport: this.transport,
      codecs: this.#codecs,
      origin: this.#origin,
      get instrumentation() {
        return mq.#instrumentation
      },
      get publishingPaused() {
        return mq.#publishingPaused
      },
      get interceptors() {
        return mq.#interceptors
      },
      assertOpen: () => this.#assertCanPublish(),
      reportError: (error, context) => this.#reportError(error, context),
      schedule: (delay, exchange, routingKey, payload, options) =>
        this.scheduler().in(delay, exchange, routingKey, payload, options),
    }
  }

  get #consumerHost(): ConsumerHost {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const mq = this
    return {
      transport: this.transport,
      codecs: this.#codecs,
      origin: this.#origin,
      currentTask: this.#currentTask,
      closingSignal: this.#closingController.signal,
      get instrumentation() {
        return mq.#instrumentation
      },
      get consumingPaused() {
        return mq.#consumingPaused
      },
      get interceptors() {
        return mq.#interceptors
      },
      inFlightChanged: (delta) => {
        this.#inFlight += delta
        // Only a drain is ever waiting: skip the copy on every other message.
        if (delta < 0 && this.#idleWaiters.size > 0) {
          for (const check of [...this.#idleWaiters]) check()
        }
      },
      consumerClosed: (consumer) => {
        this.#consumers.delete(consumer)
      },
      reportError: (error, context) => this.#reportError(error, context),
      deadLettered: (report) => this.#onDeadLetter(report),
      insideWaits: this.#inside,
      enterInside: (task) => this.#enterInside(task),
      leaveInside: (task) => this.#leaveInside(task),
    }
  }
}
