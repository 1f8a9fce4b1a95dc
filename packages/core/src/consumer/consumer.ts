import type { AsyncLocalStorage } from 'node:async_hooks'
import type { CodecRegistry } from '../codec/codec-registry.js'
import { DEFAULT_DRAIN_TIMEOUT, HANDLER_ABANDON_TIMEOUT } from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import {
  MAX_ID_BYTES,
  envelopeAge,
  readEnvelope,
  writeEnvelope,
  type Envelope,
} from '../envelope/envelope.js'
import {
  AceMqError,
  ConfigurationError,
  FatalError,
  UNENCODABLE,
  UnroutableError,
  describeError,
} from '../errors.js'
import { claimWith, type IdempotencyStore } from '../idempotency/idempotency-store.js'
import { assertIdempotencyKey } from '../idempotency/store-validation.js'
import { sleep } from '../internal/timers.js'
import { deadLetterQueueName, parkedQueueName, rungQueueName } from '../retry/queue-names.js'
import type { ConsumeOutcome, Instrumentation, ProcessScope } from '../telemetry/instrumentation.js'
import type {
  Delivery,
  Headers,
  MessageProperties,
  Transport,
  TransportSubscription,
} from '../transport/transport.js'
import { isAckResult, type AckResult } from './ack.js'
import type { ConsumerOptions } from './consumer-options.js'
import type { Handler, HandlerContext, Message } from './message.js'

/**
 * A running consumer. Closing it stops this consumer only: it cancels the subscription,
 * hands back deliveries that have not started, waits for running handlers (so their own
 * publishes, moves and acks complete) and then closes its channel.
 *
 * @example
 * ```ts
 * const consumer = await mq.consume('orders.placed', ConsumerOptions.defaults(), handle)
 * await consumer.close()
 * ```
 */
export interface Consumer extends AsyncDisposable {
  readonly queue: string
  /** Handlers of this consumer running now, counted until their settlement is done. */
  readonly inFlight: number
  /** Deliveries waiting at the pause gate, never handed to a handler. */
  readonly held: number
  /** Stops this consumer. `drainTimeout` (default 20 s) bounds the wait for running handlers. */
  close(options?: { readonly drainTimeout?: Duration }): Promise<void>
}

/** What a consumer needs from its connection. Internal to core. */
export interface ConsumerHost {
  readonly transport: Transport
  readonly codecs: CodecRegistry
  readonly origin: string
  readonly instrumentation: Instrumentation | undefined
  readonly consumingPaused: boolean
  readonly currentTask: AsyncLocalStorage<DeliveryTask>
  /** Aborted when the connection is about to close: set-aside publishes stop waiting then. */
  readonly closingSignal: AbortSignal
  taskStarted(): void
  taskFinished(): void
  consumerClosed(consumer: ConsumerEngine<unknown>): void
  /** Reports a failure the engine recovered from (a store that failed, a move that failed). */
  reportError(error: unknown, context: string): void
}

/** One delivery from the moment its processing starts until its settlement is done. */
export interface DeliveryTask {
  readonly consumer: ConsumerEngine<unknown>
  readonly delivery: Delivery
  /** Set when close gave up on the handler: whatever it returns later is discarded. */
  abandoned: boolean
}

/** How long a failed move holds its delivery before handing it back, so it does not spin. */
const FAILED_MOVE_BACKOFF_MS = 1_000

type Settled = ConsumeOutcome | 'released' | 'abandoned'

/**
 * The engine: decodes, claims, runs the handler and turns its result into the action of
 * SPEC §5 — ack, retry in the consumer or through a rung, dead-letter, park, release — acking
 * the original only after the broker has confirmed and routed any copy.
 */
export class ConsumerEngine<T> implements Consumer {
  readonly queue: string
  readonly #host: ConsumerHost
  readonly #options: ConsumerOptions
  readonly #handler: Handler<T>
  readonly #buffer: Delivery[] = []
  readonly #running = new Set<DeliveryTask>()
  readonly #idleWaiters = new Set<() => void>()
  /** Ends retry and in-progress waits at once when closing. */
  readonly #waits = new AbortController()
  /** The handlers' signal: aborted once the drain time is over. */
  readonly #handlerAbort = new AbortController()
  #subscription: TransportSubscription | undefined
  #cancelled = false
  #closing: Promise<void> | undefined
  /** Closed from inside its own handler: the channel closes once that handler has settled. */
  #closeChannelWhenIdle = false

  constructor(host: ConsumerHost, queue: string, options: ConsumerOptions, handler: Handler<T>) {
    this.#host = host
    this.queue = queue
    this.#options = options
    this.#handler = handler
  }

  get inFlight(): number {
    return this.#running.size
  }

  get held(): number {
    return this.#host.consumingPaused || this.#cancelled ? this.#buffer.length : 0
  }

  /** Subscribes; called once by `AceMq.consume`. */
  async start(): Promise<void> {
    this.#subscription = await this.#host.transport.consume(
      this.queue,
      { prefetch: this.#options.prefetch },
      (delivery) => this.#onDelivery(delivery),
    )
  }

  /** Hands over held deliveries (after `resumeConsuming`). */
  pump(): void {
    if (this.#host.consumingPaused || this.#cancelled) return
    while (this.#running.size < this.#options.concurrency && this.#buffer.length > 0) {
      this.#start(this.#buffer.shift() as Delivery)
    }
  }

  /** Running tasks, other than the caller's own when called from inside a handler. */
  busy(): number {
    const current = this.#host.currentTask.getStore()
    return this.#running.size - (current !== undefined && this.#running.has(current) ? 1 : 0)
  }

  /** Resolves once {@link busy} is zero. */
  whenIdle(): Promise<void> {
    if (this.busy() === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.busy() === 0) {
          this.#idleWaiters.delete(check)
          resolve()
        }
      }
      this.#idleWaiters.add(check)
    })
  }

  /**
   * The first steps of closing, shared with the connection's close: no more deliveries,
   * deliveries that have not started go back at once, retry and in-progress waits end.
   */
  async stopIntake(): Promise<void> {
    if (this.#cancelled) return
    this.#cancelled = true
    await this.#subscription?.cancel().catch(() => undefined)
    this.#requeueBuffered()
    this.#waits.abort()
  }

  /**
   * The connection was lost: deliveries that have not started came on a channel that is
   * gone, so the broker will redeliver them; running them now would only duplicate work.
   */
  connectionLost(): void {
    this.#buffer.length = 0
  }

  /** Aborts the handlers' signals. */
  abortHandlers(): void {
    this.#handlerAbort.abort()
  }

  /** Gives up on the handlers still running: their late outcomes are discarded. */
  abandonRunning(): void {
    for (const task of this.#running) task.abandoned = true
  }

  /** Closes the subscription's channel; the broker takes back anything unsettled. */
  async closeChannel(): Promise<void> {
    await this.#subscription?.close().catch(() => undefined)
  }

  close(options: { readonly drainTimeout?: Duration } = {}): Promise<void> {
    this.#closing ??= this.#close(
      toMillis(options.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT, 'drainTimeout'),
    )
    return this.#closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  async #close(drainTimeoutMs: number): Promise<void> {
    await this.stopIntake()
    if (!(await waitFor(this.whenIdle(), drainTimeoutMs))) {
      this.abortHandlers()
      if (!(await waitFor(this.whenIdle(), HANDLER_ABANDON_TIMEOUT))) this.abandonRunning()
    }
    this.#host.consumerClosed(this as ConsumerEngine<unknown>)
    const current = this.#host.currentTask.getStore()
    if (current !== undefined && this.#running.has(current) && !current.abandoned) {
      // Called from inside this consumer's own handler: waiting for it would wait for
      // itself. Return now; the channel closes once that handler has settled.
      this.#closeChannelWhenIdle = true
      return
    }
    await this.closeChannel()
  }

  #onDelivery(delivery: Delivery): void {
    if (this.#cancelled) {
      delivery.nack(true)
      return
    }
    this.#buffer.push(delivery)
    this.pump()
  }

  #requeueBuffered(): void {
    for (const delivery of this.#buffer.splice(0)) delivery.nack(true)
  }

  #start(delivery: Delivery): void {
    const task: DeliveryTask = {
      consumer: this as ConsumerEngine<unknown>,
      delivery,
      abandoned: false,
    }
    this.#running.add(task)
    this.#host.taskStarted()
    void this.#process(task)
  }

  #finished(task: DeliveryTask): void {
    this.#running.delete(task)
    this.#host.taskFinished()
    // Only a drain or close is ever waiting: skip the copy on every other message.
    if (this.#idleWaiters.size > 0) for (const check of [...this.#idleWaiters]) check()
    if (this.#closeChannelWhenIdle && this.#running.size === 0) void this.closeChannel()
    else this.pump()
  }

  /** Handles one delivery to the end, and always ends in {@link #finished}. */
  async #process(task: DeliveryTask): Promise<void> {
    const { delivery } = task
    let scope: ProcessScope | undefined
    let settled: Settled | undefined
    let defect: unknown
    try {
      try {
        const { envelope, headers } = readEnvelope(delivery.headers, {
          messageId: delivery.properties.messageId,
          routingKey: delivery.routingKey,
        })
        scope = this.#host.instrumentation?.processStarted({
          queue: this.queue,
          messageId: envelope.id,
          correlation: envelope.correlation,
          attempt: envelope.attempt,
          headers,
        })
        settled = await this.#handle(task, envelope, headers, scope)
      } catch (error) {
        // Only a defect in the engine itself gets here: hand the message back, never lose it.
        defect = error
        delivery.nack(true)
      }
      // Outside the inner try: the delivery is settled by now, and must not be settled twice.
      if (settled === undefined) scope?.end('rejected', defect)
      else scope?.end(settled === 'released' || settled === 'abandoned' ? 'rejected' : settled)
    } finally {
      this.#finished(task)
    }
  }

  async #handle(
    task: DeliveryTask,
    envelope: Envelope,
    headers: Headers,
    scope: ProcessScope | undefined,
  ): Promise<Settled> {
    const { delivery } = task
    const contentType = delivery.properties.contentType
    const codec = this.#host.codecs.find(contentType)
    if (codec === undefined) {
      const reason = `could not decode: no codec for content type '${contentType ?? ''}'`
      return this.#setAside(task, envelope, headers, 'parked', reason, scope)
    }
    let payload: T
    try {
      payload = codec.decode(delivery.body) as T
    } catch (error) {
      return this.#setAside(
        task,
        envelope,
        headers,
        'parked',
        `could not decode: ${describeError(error)}`,
        scope,
      )
    }

    const store = this.#options.store
    if (store !== undefined) {
      try {
        assertIdempotencyKey(envelope.id)
      } catch (error) {
        // No store can ever claim it: asking again would put it back for ever.
        const reason = `invalid message id: ${describeError(error)}`
        return this.#setAside(task, envelope, headers, 'parked', reason, scope)
      }
      let claim
      try {
        claim = await claimWith(store, envelope.id)
      } catch (error) {
        if (error instanceof ConfigurationError) {
          const reason = `the idempotency store refused the message id: ${describeError(error)}`
          return this.#setAside(task, envelope, headers, 'parked', reason, scope)
        }
        // The store could not answer: nothing ran, so put the message back unchanged and
        // ask again later. It is never acked unhandled, and spends no attempt.
        this.#host.reportError(
          error,
          `the idempotency store could not claim message ${envelope.id}`,
        )
        return this.#putBack(
          task,
          envelope,
          headers,
          this.#options.inProgressDelayMs,
          'retried',
          scope,
        )
      }
      if (claim === 'duplicate') {
        delivery.ack()
        return 'acked'
      }
      if (claim === 'in_progress') {
        return this.#putBack(
          task,
          envelope,
          headers,
          this.#options.inProgressDelayMs,
          'in_progress',
          scope,
        )
      }
    }

    const message: Message<T> = {
      payload,
      envelope,
      headers,
      queue: this.queue,
      contentType,
      body: delivery.body,
      redelivered: delivery.redelivered,
    }
    const context: HandlerContext = { signal: this.#handlerAbort.signal, queue: this.queue }
    const result = await this.#runHandler(task, message, context, scope)
    if (task.abandoned) return 'abandoned'

    if (store !== undefined) {
      if (result.kind === 'accept') {
        try {
          await store.confirm(envelope.id)
        } catch (error) {
          await this.#confirmAgain(store, envelope.id, error)
        }
      } else {
        // A release that fails leaves the claim to expire; the retry waits as in progress.
        await store
          .release(envelope.id)
          .catch((error: unknown) =>
            this.#host.reportError(error, `could not release message ${envelope.id}`),
          )
      }
    }
    return this.#settle(task, envelope, headers, result, scope)
  }

  /**
   * Records the work as done after a first confirm failed. A confirm that fails is tried
   * again a few times: an id left unconfirmed becomes claimable once its lease runs out, and
   * a second copy of the message (a publisher that resent after a lost confirm) would then
   * run the handler again. If it still fails the message is acked all the same — the work is
   * done — and reported.
   */
  async #confirmAgain(store: IdempotencyStore, id: string, failure: unknown): Promise<void> {
    let last = failure
    for (const wait of CONFIRM_RETRY_DELAYS_MS) {
      if (!(await sleep(wait, this.#host.closingSignal))) break
      try {
        await store.confirm(id)
        return
      } catch (error) {
        last = error
      }
    }
    this.#host.reportError(last, `could not confirm message ${id}`)
  }

  async #runHandler(
    task: DeliveryTask,
    message: Message<T>,
    context: HandlerContext,
    scope: ProcessScope | undefined,
  ): Promise<AckResult> {
    const started = scope === undefined ? 0 : performance.now()
    let failure: unknown
    try {
      // No closure per message: run() passes the arguments on.
      const returned = await this.#host.currentTask.run(
        task,
        invokeHandler,
        this.#handler,
        message,
        context,
        scope,
      )
      return isAckResult(returned) ? returned : ACCEPT
    } catch (error) {
      failure = error
      if (error instanceof FatalError) return { kind: 'dead-letter', reason: describeError(error) }
      return { kind: 'retry', reason: describeError(error), delayMs: undefined }
    } finally {
      scope?.handled(performance.now() - started, failure)
    }
  }

  /** Not async: an accepted message is acked without a promise around it. */
  #settle(
    task: DeliveryTask,
    envelope: Envelope,
    headers: Headers,
    result: AckResult,
    scope: ProcessScope | undefined,
  ): Settled | Promise<Settled> {
    const { delivery } = task
    switch (result.kind) {
      case 'accept':
        delivery.ack()
        return 'acked'
      case 'release':
        delivery.nack(true)
        return 'released'
      case 'dead-letter':
        return this.#setAside(task, envelope, headers, 'rejected', result.reason, scope)
      case 'park':
        return this.#setAside(task, envelope, headers, 'parked', result.reason, scope)
      case 'retry':
        return this.#retry(task, envelope, headers, result, scope)
    }
  }

  async #retry(
    task: DeliveryTask,
    envelope: Envelope,
    headers: Headers,
    result: Extract<AckResult, { kind: 'retry' }>,
    scope: ProcessScope | undefined,
  ): Promise<Settled> {
    const policy = this.#options.retryPolicy
    let delayMs: number
    let target = this.queue
    if (policy === undefined) {
      delayMs = result.delayMs ?? this.#options.retryDelayMs
    } else {
      const age = envelopeAge(envelope, Date.now())
      const wait = policy.nextWait(envelope.attempt, age)
      if (wait === null) {
        const why =
          policy.giveUpReason(envelope.attempt, age) ??
          `gave up after ${envelope.attempt} attempt(s)`
        return this.#setAside(
          task,
          envelope,
          headers,
          'dead_lettered',
          `${why}: ${result.reason}`,
          scope,
        )
      }
      delayMs = wait.delayMs
      if (wait.inBroker) target = rungQueueName(this.queue, wait.delayMs)
    }
    if (target === this.queue && !(await sleep(delayMs, this.#waits.signal))) {
      // Closing cut the wait short: hand the message back as it came, attempt unchanged.
      task.delivery.nack(true)
      return 'released'
    }
    const next: Envelope = {
      ...envelope,
      attempt: envelope.attempt + 1,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.#move(task, target, next, headers, undefined)
    if (moved !== 'moved') return moved
    scope?.retried(delayMs, target !== this.queue)
    return 'retried'
  }

  /** In progress (or a store that could not answer): wait, then put back with the attempt unchanged. */
  async #putBack(
    task: DeliveryTask,
    envelope: Envelope,
    headers: Headers,
    delayMs: number,
    outcome: 'in_progress' | 'retried',
    scope: ProcessScope | undefined,
  ): Promise<Settled> {
    if (!(await sleep(delayMs, this.#waits.signal))) {
      task.delivery.nack(true)
      return 'released'
    }
    const copy: Envelope = {
      ...envelope,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.#move(task, this.queue, copy, headers, undefined)
    if (moved !== 'moved') return moved
    if (outcome === 'retried') scope?.retried(delayMs, false)
    return outcome
  }

  async #setAside(
    task: DeliveryTask,
    envelope: Envelope,
    headers: Headers,
    outcome: 'dead_lettered' | 'rejected' | 'parked',
    reason: string,
    scope: ProcessScope | undefined,
  ): Promise<Settled> {
    const target =
      outcome === 'parked' ? parkedQueueName(this.queue) : deadLetterQueueName(this.queue)
    const moved = await this.#move(task, target, envelope, headers, reason)
    if (moved !== 'moved') return moved
    scope?.setAside(outcome, target, reason)
    return outcome
  }

  /**
   * Republishes a copy to `target` through the default exchange, mandatory and persistent,
   * and acks the original only once the broker has confirmed and routed the copy. A failure
   * that may pass hands the original back with requeue: nothing is ever lost to a failed
   * move. A copy that can never be written as it is (a header the client cannot encode) is
   * parked instead, without its application headers, so it does not come back for ever. The
   * publish is tied to the connection's lifetime, not the handler's signal, so a message given
   * up on during shutdown still reaches its dead-letter queue.
   */
  async #move(
    task: DeliveryTask,
    target: string,
    envelope: Envelope,
    headers: Headers,
    error: string | undefined,
  ): Promise<'moved' | 'parked' | 'released'> {
    const { delivery } = task
    try {
      await this.#publishCopy(delivery, target, envelope, headers, error)
    } catch (first) {
      let failure = first
      if (isPermanent(failure) && !task.abandoned) {
        const parked = parkedQueueName(this.queue)
        const reason = `could not republish to '${target}' as it is (${describeError(failure)}); its application headers were dropped${error === undefined ? '' : `: ${error}`}`
        try {
          await this.#publishCopy(delivery, parked, envelope, {}, reason)
          delivery.ack()
          return 'parked'
        } catch (second) {
          failure = second
        }
      }
      this.#host.reportError(
        failure,
        `could not move message ${envelope.id} to '${target}'; it goes back to '${this.queue}'`,
      )
      if (failure instanceof UnroutableError && target.startsWith(`${this.queue}.retry.`)) {
        this.#host.instrumentation?.rungMissing?.(this.queue, target)
      }
      if (task.abandoned) return 'released'
      await sleep(FAILED_MOVE_BACKOFF_MS, this.#waits.signal)
      delivery.nack(true)
      return 'released'
    }
    if (!task.abandoned) delivery.ack()
    return 'moved'
  }

  #publishCopy(
    delivery: Delivery,
    target: string,
    envelope: Envelope,
    headers: Headers,
    error: string | undefined,
  ): Promise<void> {
    return this.#host.transport.publish(
      {
        exchange: '',
        routingKey: target,
        body: delivery.body,
        headers: writeEnvelope(envelope, headers, error === undefined ? undefined : { error }),
        properties: republishedProperties(delivery.properties, envelope.id),
        persistent: true,
        mandatory: true,
      },
      { whenBlocked: 'wait', signal: this.#host.closingSignal },
    )
  }
}

/** A failure that sending the same copy again can never fix. */
function isPermanent(error: unknown): boolean {
  return (
    error instanceof ConfigurationError ||
    (error instanceof AceMqError && error.code === UNENCODABLE)
  )
}

const ACCEPT: AckResult = Object.freeze({ kind: 'accept' })

/**
 * The properties a copy keeps: the original's, less `expiration` (a copy waits by its
 * queue's rules, not the first publish's) and `userId` (the broker checks it against the
 * connection's user), with the message id set to the envelope's when it fits.
 */
function republishedProperties(
  properties: MessageProperties,
  messageId: string,
): MessageProperties {
  const { expiration: _expiration, userId: _userId, messageId: _messageId, ...kept } = properties
  // An id longer than AMQP's message-id can hold still travels in x-acemq-id.
  return Buffer.byteLength(messageId) <= MAX_ID_BYTES ? { ...kept, messageId } : kept
}

/** Calls the handler, inside the instrumentation's scope when there is one. */
function invokeHandler<T>(
  handler: Handler<T>,
  message: Message<T>,
  context: HandlerContext,
  scope: ProcessScope | undefined,
): ReturnType<Handler<T>> {
  return scope === undefined
    ? handler(message, context)
    : scope.run(() => handler(message, context))
}

/** How long to wait before each retry of a failed confirm. */
const CONFIRM_RETRY_DELAYS_MS = [100, 500, 2_000] as const

/** Resolves true when `promise` settles within `ms`, false otherwise. */
export async function waitFor(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms <= 0) {
    let done = false
    void promise.then(() => (done = true))
    await Promise.resolve()
    return done
  }
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
    timer.unref?.()
  })
  try {
    return await Promise.race([promise.then(() => true as const), timeout])
  } finally {
    clearTimeout(timer)
  }
}
