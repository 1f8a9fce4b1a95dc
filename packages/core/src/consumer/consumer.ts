import type { AsyncLocalStorage } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import type { CodecRegistry } from '../codec/codec-registry.js'
import { DEFAULT_DRAIN_TIMEOUT, HANDLER_ABANDON_TIMEOUT } from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import {
  MAX_ID_BYTES,
  envelopeAge,
  readEnvelope,
  writeCopyHeaders,
  type Envelope,
} from '../envelope/envelope.js'
import { AceMqError, describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import {
  claimWith,
  type ClaimResult,
  type IdempotencyStore,
} from '../idempotency/idempotency-store.js'
import { assertIdempotencyKey } from '../idempotency/store-validation.js'
import { sleep } from '../internal/timers.js'
import { Hold, type HoldEnd, type InPlaceFailures } from '../ordered/in-place-failures.js'
import type { Hop, StepHook } from '../pipeline/step-hook.js'
import { deadLetterQueueName, parkedQueueName, rungQueueName } from '../retry/queue-names.js'
import type { ConsumeOutcome, Instrumentation, ProcessScope } from '../telemetry/instrumentation.js'
import { consumerDeclarations } from '../topology/topology.js'
import type {
  Declaration,
  Delivery,
  Headers,
  MessageProperties,
  SubscriptionStatus,
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
  /**
   * Deliveries waiting out a delay while holding their place in the prefetch window (a retry
   * wait in the consumer, an in-progress or store-failure put-back, a move being tried again).
   * They do not occupy a handler and are not counted in {@link inFlight}.
   */
  readonly waiting: number
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
  readonly currentTask: AsyncLocalStorage<DeliveryTask | undefined>
  /** Aborted when the connection is about to close: set-aside publishes stop waiting then. */
  readonly closingSignal: AbortSignal
  /** Handlers (and their settlement) running across the connection went up or down by one. */
  inFlightChanged(delta: 1 | -1): void
  consumerClosed(consumer: ConsumerEngine<unknown>): void
  /** Reports a failure the engine recovered from (a store that failed, a move that failed). */
  reportError(error: unknown, context: string): void
  /**
   * Handlers waiting inside a drain or close of this connection (or of one of its consumers):
   * no drain or close waits for them, or two of them would wait for each other.
   */
  readonly insideWaits: TaskSet
  /** `task` waits inside a drain or close from now on (until {@link leaveInside}). */
  enterInside(task: DeliveryTask): void
  leaveInside(task: DeliveryTask): void
}

/** A set of tasks, as drains and closes read it. */
export interface TaskSet {
  has(task: DeliveryTask): boolean
  readonly size: number
}

/** One delivery from the moment its processing starts until its settlement is done. */
export interface DeliveryTask {
  readonly consumer: ConsumerEngine<unknown>
  readonly delivery: Delivery
  readonly lane: Lane
  /** Set when close gave up on the handler: whatever it returns later is discarded. */
  abandoned: boolean
}

/** What a consumer is struggling with, for health. */
export interface ConsumerTrouble {
  readonly queue: string
  /** The subscription's channel was lost and it is not consuming again yet. */
  readonly unsubscribed: boolean
  /** Queues a copy could not be moved to, while a move is being tried again. */
  readonly failingMoves: readonly string[]
  /** Why the idempotency store is failing, while it keeps failing. */
  readonly storeFailure: string | undefined
}

/**
 * One subscription of a consumer and the deliveries it carries. A consumer has a new one after
 * a long pause (see {@link ConsumerOptions.heldTimeoutMs}); an old one is closed once the
 * deliveries it carried are settled.
 */
interface Lane {
  subscription: TransportSubscription | undefined
  /** Tasks (running or waiting) on this lane's deliveries. */
  tasks: number
  /** Its channel was lost and the transport has not reported it consuming again. */
  lost: boolean
  /** Cancelled for good: it carries no new deliveries and is closed once idle. */
  retired: boolean
}

/**
 * One delivery being handled, from its decoded envelope on: what every step of its handling
 * (handler, settle, retry, put back, set aside, forward) needs, passed along as one.
 */
interface Handling {
  readonly task: DeliveryTask
  readonly envelope: Envelope
  readonly headers: Headers
  readonly scope: ProcessScope | undefined
}

/** The longest a failed move waits before it is tried again. */
const MAX_MOVE_BACKOFF_MS = 30_000
/** The first wait before a failed move is tried again. */
const FIRST_MOVE_BACKOFF_MS = 1_000
/** How long cancelling a subscription may take before closing goes on without it. */
const CANCEL_TIMEOUT_MS = 5_000

type Settled = ConsumeOutcome | 'released' | 'abandoned'

/**
 * Where a consumer is in its life. Every change goes through {@link ConsumerEngine}'s `#moveTo`,
 * which refuses (`ACEMQ_INVALID_STATE`) any move not drawn here:
 *
 * ```text
 *   consuming ──#letGoWhilePaused──▶ detached ──pump (resumed)──▶ resubscribing
 *       ▲                                ▲                              │
 *       └──────── subscribed again ──────┼──────────────────────────────┤
 *                                        └─ ended, neither subscribed ──┘
 *                                           nor stopped (defensive)
 *   consuming | detached | resubscribing ──stopIntake──▶ stopped
 *   stopped ──close() from inside its own handler──▶ closingWhenIdle
 *   stopped | closingWhenIdle | closed ──closeChannel──▶ closed
 * ```
 *
 * - `consuming`: subscribed (or subscribing, before `start` returns). Deliveries are taken and
 *   handed to handlers unless the connection has paused consuming.
 * - `detached`: let go of its subscription after a long pause (`heldTimeout`); the first pump
 *   after consuming resumes subscribes again. Deliveries still buffered may be handed over.
 * - `resubscribing`: subscribing again after a long pause, retrying with backoff until it works
 *   or the consumer stops.
 * - `stopped`: intake stopped (a close of the consumer or of its connection): no new deliveries,
 *   no waits; handlers running are drained or abandoned, then the channel closes.
 * - `closingWhenIdle`: closed from inside one of its own handlers: the channel closes as soon as
 *   no handler of this consumer runs any more.
 * - `closed`: its channels are closed.
 *
 * The first three take deliveries ({@link intakeOpen}); the last three never do again.
 */
type ConsumerState =
  'consuming' | 'detached' | 'resubscribing' | 'stopped' | 'closingWhenIdle' | 'closed'

/** The moves allowed out of each state (see {@link ConsumerState}). */
const TRANSITIONS: Readonly<Record<ConsumerState, readonly ConsumerState[]>> = {
  consuming: ['detached', 'stopped'],
  detached: ['resubscribing', 'stopped'],
  resubscribing: ['consuming', 'detached', 'stopped'],
  stopped: ['closingWhenIdle', 'closed'],
  closingWhenIdle: ['closed'],
  closed: ['closed'],
}

/**
 * Whether a consumer in `state` still takes deliveries. On the per-delivery path: the common
 * state is compared first, so it costs one comparison, as the boolean it replaced did.
 */
function intakeOpen(state: ConsumerState): boolean {
  return state === 'consuming' || state === 'detached' || state === 'resubscribing'
}

/**
 * The engine: decodes, claims, runs the handler and turns its result into the action the
 * design names (docs/design.md, "What the consumer does") — ack, retry in the consumer or
 * through a rung, dead-letter, park, release — acking the original only after the broker has
 * confirmed and routed any copy.
 *
 * Two kinds of task hold a delivery: one that runs a handler or settles (counted in
 * `inFlight`, bounded by `concurrency`), and one that waits out a delay (counted in `waiting`,
 * bounded only by the prefetch window). A wait never blocks the deliveries behind it.
 */
export class ConsumerEngine<T> implements Consumer {
  readonly queue: string
  readonly #host: ConsumerHost
  readonly #options: ConsumerOptions
  readonly #handler: Handler<T>
  readonly #buffer: { readonly delivery: Delivery; readonly lane: Lane }[] = []
  readonly #running = new Set<DeliveryTask>()
  /** Tasks waiting out a delay, and whether a drain ends the wait (a failed move's does not). */
  readonly #waiting = new Map<DeliveryTask, boolean>()
  readonly #idleWaiters = new Set<() => void>()
  readonly #lanes = new Set<Lane>()
  readonly #failingMoves = new Map<string, number>()
  /** Ends retry, in-progress and store waits at once: a drain or a close. */
  #drainWaits = new AbortController()
  /** Ends every wait, failed moves included: a close. */
  readonly #closeWaits = new AbortController()
  /** The handlers' signal: aborted once the drain time is over. */
  readonly #handlerAbort = new AbortController()
  /** What every handler of this consumer is given besides its message. */
  readonly #context: HandlerContext
  #lane: Lane | undefined
  /** Where it is in its life; changed only by {@link #moveTo}. */
  #state: ConsumerState = 'consuming'
  /** {@link pump}'s loop is running (a handler inside it pumps again). */
  #pumping = false
  /** What {@link close} answers, once it has been called: every call answers the same. */
  #closing: Promise<void> | undefined
  /** This consumer's own handlers that called {@link close}: the close never waits for them. */
  readonly #closers = new Set<DeliveryTask>()
  #holdTimer: ReturnType<typeof setTimeout> | undefined
  #storeFailure: string | undefined
  /** An ordered consumer's failure hook (see {@link InPlaceFailures}); undefined for the others. */
  readonly #inPlace: InPlaceFailures | undefined
  /** An ordered consumer's deliveries held after a failure. */
  readonly #holds = new Set<Hold>()
  /** A pipeline step's hook (see {@link StepHook}); undefined for the others. */
  readonly #step: StepHook | undefined

  constructor(
    host: ConsumerHost,
    queue: string,
    options: ConsumerOptions,
    handler: Handler<T>,
    inPlace?: InPlaceFailures,
    step?: StepHook,
  ) {
    this.#host = host
    this.queue = queue
    this.#options = options
    this.#handler = handler
    this.#inPlace = inPlace
    this.#step = step
    this.#context = Object.freeze({ signal: this.#handlerAbort.signal, queue })
  }

  /** The one place the state changes; a move {@link TRANSITIONS} does not allow is a defect. */
  #moveTo(next: ConsumerState): void {
    if (!TRANSITIONS[this.#state].includes(next)) {
      throw new AceMqError(
        `the consumer on '${this.queue}' cannot go from '${this.#state}' to '${next}'`,
        { code: ErrorCodes.INVALID_STATE },
      )
    }
    this.#state = next
  }

  get inFlight(): number {
    return this.#running.size
  }

  get held(): number {
    return this.#host.consumingPaused || !intakeOpen(this.#state) ? this.#buffer.length : 0
  }

  get waiting(): number {
    return this.#waiting.size
  }

  /** What this consumer is struggling with, or undefined when nothing. */
  trouble(): ConsumerTrouble | undefined {
    const unsubscribed = intakeOpen(this.#state) && this.#lane !== undefined && this.#lane.lost
    if (!unsubscribed && this.#failingMoves.size === 0 && this.#storeFailure === undefined)
      return undefined
    return {
      queue: this.queue,
      unsubscribed,
      failingMoves: [...this.#failingMoves.keys()],
      storeFailure: this.#storeFailure,
    }
  }

  /** Subscribes; called once by `AceMq.consume`. */
  async start(): Promise<void> {
    this.#lane = await this.#subscribe()
  }

  async #subscribe(): Promise<Lane> {
    const lane: Lane = { subscription: undefined, tasks: 0, lost: false, retired: false }
    this.#lanes.add(lane)
    try {
      lane.subscription = await this.#host.transport.consume(
        this.queue,
        {
          prefetch: this.#options.prefetch,
          onStatus: (status) => this.#onStatus(lane, status),
        },
        (delivery) => this.#onDelivery(delivery, lane),
      )
    } catch (error) {
      this.#lanes.delete(lane)
      throw error
    }
    return lane
  }

  /** Hands over held deliveries (after `resumeConsuming`), and subscribes again if it had to let go. */
  pump(): void {
    if (this.#host.consumingPaused || !intakeOpen(this.#state)) return
    for (const hold of this.#holds) hold.resumed()
    // An ordered consumer holding a delivery runs nothing behind it.
    if (this.#holds.size > 0) return
    this.#clearHoldTimer()
    if (this.#state === 'detached') void this.#resubscribe()
    // A delivery handled without a promise finishes inside #start and pumps again: the loop
    // already running takes the next one, so the stack does not grow with the buffer.
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (this.#mayStartNext()) {
        const next = this.#buffer.shift() as { readonly delivery: Delivery; readonly lane: Lane }
        // Its channel is gone: the broker has put it back and will deliver it again.
        if (next.delivery.settleable === false) continue
        this.#start(next.delivery, next.lane)
      }
    } finally {
      this.#pumping = false
    }
  }

  /** A handler run inside the loop may have paused, closed or held (an ordered consumer). */
  #mayStartNext(): boolean {
    return (
      this.#running.size < this.#options.concurrency &&
      this.#buffer.length > 0 &&
      this.#holds.size === 0 &&
      !this.#host.consumingPaused &&
      intakeOpen(this.#state)
    )
  }

  /**
   * Consuming was paused. Held deliveries are not held for ever: after `heldTimeout` the
   * consumer hands them back and stops its subscription until consuming resumes, so a long
   * pause never runs into the broker's `consumer_timeout` (which closes the channel).
   */
  paused(): void {
    // An ordered consumer never lets go while paused: a cancel would hand its queue to the next
    // single active consumer while it still holds a delivery, and a requeue would put that
    // delivery behind the ones after it. (The broker's consumer_timeout closing the channel is
    // safe: a closed channel gives its deliveries back in their place.)
    if (this.#holdTimer !== undefined || !intakeOpen(this.#state) || this.#inPlace !== undefined)
      return
    this.#holdTimer = setTimeout(() => {
      this.#holdTimer = undefined
      void this.#letGoWhilePaused()
    }, this.#options.heldTimeoutMs)
    this.#holdTimer.unref?.()
  }

  #clearHoldTimer(): void {
    if (this.#holdTimer === undefined) return
    clearTimeout(this.#holdTimer)
    this.#holdTimer = undefined
  }

  async #letGoWhilePaused(): Promise<void> {
    const lane = this.#lane
    // Only a consuming consumer has a lane: a detached or resubscribing one has none yet.
    if (!this.#host.consumingPaused || this.#state !== 'consuming' || lane === undefined) return
    this.#lane = undefined
    this.#moveTo('detached')
    lane.retired = true
    this.#requeueBuffered()
    await this.#cancel(lane)
    this.#retireIfIdle(lane)
  }

  /** Called by {@link pump} in `detached` only: one run at a time, as the state says. */
  async #resubscribe(): Promise<void> {
    this.#moveTo('resubscribing')
    try {
      // Only stopIntake moves it out of 'resubscribing' while this runs.
      for (let attempt = 1; this.#state === 'resubscribing'; attempt++) {
        try {
          const lane = await this.#subscribe()
          if (this.#state !== 'resubscribing') {
            lane.retired = true
            await this.#cancel(lane)
            // Answered after the consumer closed: closeChannel found no subscription on it.
            if (this.#state === 'closed') void lane.subscription?.close().catch(() => undefined)
            else this.#retireIfIdle(lane)
          } else {
            this.#lane = lane
            this.#moveTo('consuming')
            this.pump()
          }
          return
        } catch (error) {
          this.#host.reportError(
            error,
            `could not subscribe to '${this.queue}' again after a pause (will retry)`,
          )
          if (!(await sleep(moveBackoff(attempt), this.#closeWaits.signal))) return
        }
      }
    } finally {
      // Gave up without being stopped: the next pump tries again.
      if (this.#state === 'resubscribing') this.#moveTo('detached')
    }
  }

  /** Whether `task` is one of this consumer's running handlers (or settling). */
  isRunning(task: DeliveryTask): boolean {
    return this.#running.has(task)
  }

  /** Running tasks, other than those in `except` (a drain or close called from inside handlers). */
  busy(except: TaskSet): number {
    if (except.size === 0) return this.#running.size
    let busy = 0
    for (const task of this.#running) if (!except.has(task)) busy++
    return busy
  }

  /** Resolves once {@link busy} is zero. `except` is read again at every check. */
  whenIdle(except: TaskSet): Promise<void> {
    if (this.busy(except) === 0) return Promise.resolve()
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.busy(except) === 0) {
          this.#idleWaiters.delete(check)
          resolve()
        }
      }
      this.#idleWaiters.add(check)
    })
  }

  /** Looks again whether a drain or close is done (the set it excludes grew). */
  recheckIdle(): void {
    this.#notifyIdle()
  }

  /** A drain: deliveries waiting out a retry, in-progress or store delay go back at once. */
  endWaits(): void {
    this.#wakeWaiting(false)
    this.#drainWaits.abort()
    // Once a close has stopped intake, the ended signal stays: a wait begun after it ends at
    // once, as the close ended every wait before it (simulation finding 14).
    if (intakeOpen(this.#state)) this.#drainWaits = new AbortController()
  }

  /**
   * Counts the waiting tasks a drain (or, with `all`, a close) is about to wake as running
   * again, right now: they settle (hand their delivery back) before the drain may answer.
   */
  #wakeWaiting(all: boolean): void {
    for (const [task, drainable] of this.#waiting) {
      if (!drainable && !all) continue
      this.#waiting.delete(task)
      this.#running.add(task)
      this.#host.inFlightChanged(1)
    }
  }

  /**
   * The first steps of closing, shared with the connection's close: no more deliveries,
   * deliveries that have not started go back at once, every wait ends (its delivery goes back).
   */
  async stopIntake(): Promise<void> {
    if (!intakeOpen(this.#state)) return
    this.#moveTo('stopped')
    this.#clearHoldTimer()
    this.#requeueBuffered()
    this.#wakeWaiting(true)
    this.#drainWaits.abort()
    this.#closeWaits.abort()
    await Promise.all([...this.#lanes].map((lane) => this.#cancel(lane)))
    // Anything that arrived while the cancel was on its way goes back too.
    this.#requeueBuffered()
  }

  /** Stops new deliveries on `lane`, bounded: a hung broker must not hold a close open. */
  async #cancel(lane: Lane): Promise<void> {
    const subscription = lane.subscription
    // An ordered consumer stops by closing its channel once idle, never by a cancel (see paused()).
    if (subscription === undefined || this.#inPlace !== undefined) return
    const cancelled = await waitFor(
      subscription.cancel().catch(() => undefined),
      CANCEL_TIMEOUT_MS,
    )
    if (!cancelled) {
      this.#host.reportError(
        new AceMqError(`cancelling the subscription to '${this.queue}' took over 5 s`, {
          code: ErrorCodes.CANCEL_TIMEOUT,
        }),
        `closing the channel of '${this.queue}' instead`,
      )
    }
  }

  /**
   * The connection was lost. Deliveries from a transport that says whether they can still be
   * settled are judged one by one (see {@link pump}); from one that does not, the buffer is
   * dropped, since the broker redelivers everything unsettled on a lost connection.
   */
  connectionLost(): void {
    for (let i = this.#buffer.length - 1; i >= 0; i--) {
      if (this.#buffer[i]?.delivery.settleable === undefined) this.#buffer.splice(i, 1)
    }
    for (const hold of this.#holds) hold.channelLost()
  }

  /** Aborts the handlers' signals. */
  abortHandlers(): void {
    this.#handlerAbort.abort()
  }

  /** Gives up on the handlers still running: their late outcomes are discarded. */
  abandonRunning(): void {
    // Given up on: nothing waits for them any more, and nothing counts them in `inFlight`. They
    // leave the running set before anyone is told: a drain told first would look, still see them
    // running, and never be told again (simulation finding 12).
    const abandoned = [...this.#running]
    this.#running.clear()
    for (const task of abandoned) {
      task.abandoned = true
      this.#host.inFlightChanged(-1)
    }
    for (const task of this.#waiting.keys()) task.abandoned = true
    this.#waiting.clear()
    this.#notifyIdle()
  }

  /** Closes the subscriptions' channels; the broker takes back anything unsettled. */
  async closeChannel(): Promise<void> {
    this.#moveTo('closed')
    this.#host.consumerClosed(this as ConsumerEngine<unknown>)
    this.#clearHoldTimer()
    const lanes = [...this.#lanes]
    this.#lanes.clear()
    this.#lane = undefined
    await Promise.all(lanes.map((lane) => lane.subscription?.close().catch(() => undefined)))
  }

  close(options: { readonly drainTimeout?: Duration } = {}): Promise<void> {
    const drainTimeoutMs = toMillis(options.drainTimeout ?? DEFAULT_DRAIN_TIMEOUT, 'drainTimeout')
    // Asked now, for the caller: is it one of this consumer's own handlers?
    const caller = this.#host.currentTask.getStore()
    const inside = caller !== undefined && this.#running.has(caller)
    // Every caller from inside waits inside, not only the first: a later one is answered by the
    // same close, which must not wait for it in turn (simulation schedule of seed -1540268967:
    // a close of 35 days waited for the second caller, which waited for that close).
    const entered = inside && !this.#closers.has(caller)
    if (entered) {
      this.#closers.add(caller)
      this.#host.enterInside(caller)
    }
    this.#closing ??= this.#close(drainTimeoutMs)
    if (entered) {
      const leave = (): void => this.#host.leaveInside(caller)
      // Registered before the caller awaits the close: it has left before it goes on.
      this.#closing.then(leave, leave)
    }
    return this.#closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  async #close(drainTimeoutMs: number): Promise<void> {
    const deadline = Date.now() + drainTimeoutMs
    await this.stopIntake()
    // Handlers waiting inside a drain or close (this one's caller among them) are not waited for.
    const except = this.#host.insideWaits
    await drainOrAbandon([this], () => this.whenIdle(except), drainTimeoutMs)
    // Handlers waiting inside a drain or close were not waited for: give them what is left of
    // the drain (at least the abandon grace) to return and settle before the channel closes
    // under them, this close's callers excepted (read at every check: one may call it meanwhile).
    // Asked of every handler, not only those still inside: a drain from inside can answer in the
    // same turn as the wait above (simulation findings 8 and 9).
    await waitFor(this.whenIdle(this.#closers), graceUntil(deadline))
    if (this.#callerStillRunning()) {
      // Called from inside this consumer's own handlers: waiting for them would wait for
      // themselves. Return now; the channel closes once they have settled (unless the
      // connection's close has closed it meanwhile). Until then the consumer stays the
      // connection's: a connection close drains it like any other (simulation finding 15).
      if (this.#state === 'stopped') this.#moveTo('closingWhenIdle')
      return
    }
    await this.closeChannel()
  }

  /** Whether one of the handlers that called {@link close} is still running (not given up on). */
  #callerStillRunning(): boolean {
    for (const task of this.#closers) if (this.#running.has(task) && !task.abandoned) return true
    return false
  }

  #onStatus(lane: Lane, status: SubscriptionStatus): void {
    if (status.type === 'consuming') {
      lane.lost = false
      return
    }
    lane.lost = true
    for (const hold of this.#holds) hold.channelLost()
    // Deliveries from the lost channel are back on the queue: running them would only
    // duplicate the work, and their acks could not be written.
    for (let i = this.#buffer.length - 1; i >= 0; i--) {
      const entry = this.#buffer[i]
      if (entry !== undefined && entry.lane === lane && entry.delivery.settleable !== true) {
        this.#buffer.splice(i, 1)
      }
    }
    if (lane === this.#lane && intakeOpen(this.#state)) {
      this.#host.reportError(
        status.error ??
          new AceMqError(`the channel of the consumer on '${this.queue}' closed`, {
            code: ErrorCodes.CHANNEL_CLOSED,
          }),
        `the consumer on '${this.queue}' lost its channel; the transport subscribes again`,
      )
    }
  }

  #onDelivery(delivery: Delivery, lane: Lane): void {
    if (!intakeOpen(this.#state) || lane.retired) {
      // An ordered consumer leaves it to its channel's close, which puts it back in its place.
      if (this.#inPlace === undefined) delivery.nack(true)
      return
    }
    this.#buffer.push({ delivery, lane })
    if (this.#host.consumingPaused) this.paused()
    else this.pump()
  }

  #requeueBuffered(): void {
    const buffered = this.#buffer.splice(0)
    // An ordered consumer leaves them to its channel's close (see #onDelivery).
    if (this.#inPlace === undefined) for (const { delivery } of buffered) delivery.nack(true)
  }

  #start(delivery: Delivery, lane: Lane): void {
    const task: DeliveryTask = {
      consumer: this as ConsumerEngine<unknown>,
      delivery,
      lane,
      abandoned: false,
    }
    lane.tasks++
    this.#running.add(task)
    this.#host.inFlightChanged(1)
    // A delivery started from inside a handler's async context (a handler that resumed
    // consuming, or a transport that delivered from a publish) must not inherit that
    // handler's identity: "am I inside a handler?" is answered per task. Not exit(): on Node 20
    // it only disables the storage, and the handler's own run() inside enables it again, so the
    // settlement after it would still see the outer handler.
    if (this.#host.currentTask.getStore() === undefined) this.#process(task)
    else this.#host.currentTask.run(undefined, () => this.#process(task))
  }

  /** The task stops counting as running while it waits; other deliveries take its place. */
  #startWaiting(task: DeliveryTask, drainable: boolean): void {
    if (!this.#running.delete(task)) return
    this.#waiting.set(task, drainable)
    this.#host.inFlightChanged(-1)
    this.#notifyIdle()
    this.pump()
  }

  /** The wait is over: the task settles, and counts as running again until it has. */
  #stopWaiting(task: DeliveryTask): void {
    if (!this.#waiting.delete(task)) return
    this.#running.add(task)
    this.#host.inFlightChanged(1)
  }

  #notifyIdle(): void {
    // Only a drain or close is ever waiting: skip the copy on every other message.
    if (this.#idleWaiters.size > 0) for (const check of [...this.#idleWaiters]) check()
  }

  #finished(task: DeliveryTask): void {
    if (this.#running.delete(task)) this.#host.inFlightChanged(-1)
    this.#waiting.delete(task)
    task.lane.tasks--
    this.#retireIfIdle(task.lane)
    this.#notifyIdle()
    if (this.#state === 'closingWhenIdle' && this.#running.size === 0) void this.closeChannel()
    else this.pump()
  }

  /** Closes a retired subscription once nothing it delivered is still being settled. */
  #retireIfIdle(lane: Lane): void {
    if (!lane.retired || lane.tasks > 0 || !this.#lanes.has(lane)) return
    this.#lanes.delete(lane)
    void lane.subscription?.close().catch(() => undefined)
  }

  /**
   * Waits `ms` outside the handler slots. Resolves false when the wait was ended (by a drain
   * for `drainable` waits, by a close for every wait) or the delivery's channel is gone.
   */
  async #wait(task: DeliveryTask, ms: number, drainable: boolean): Promise<boolean> {
    this.#startWaiting(task, drainable)
    try {
      // stopIntake aborts both, so a close ends every wait; a drain ends only drainable ones.
      const signal = drainable ? this.#drainWaits.signal : this.#closeWaits.signal
      const waited = await sleep(ms, signal)
      return waited && intakeOpen(this.#state) && task.delivery.settleable !== false
    } finally {
      this.#stopWaiting(task)
    }
  }

  /**
   * Handles one delivery to the end, and always ends in {@link #finished}. Not async: a plain
   * consumer's delivery whose handler returns without a promise is decoded, handled and acked
   * in this call, with no promise made for it (see {@link #handlePlain}).
   */
  #process(task: DeliveryTask): void {
    const { delivery } = task
    let scope: ProcessScope | undefined
    let handled: Settled | Promise<Settled>
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
      const handling: Handling = { task, envelope, headers, scope }
      handled = this.#handlePlain(handling) ?? this.#handle(handling)
    } catch (error) {
      this.#defect(task, scope, error)
      return
    }
    if (!(handled instanceof Promise)) {
      this.#processed(task, scope, handled)
      return
    }
    handled.then(
      (settled) => this.#processed(task, scope, settled),
      (error: unknown) => this.#defect(task, scope, error),
    )
  }

  #processed(task: DeliveryTask, scope: ProcessScope | undefined, settled: Settled): void {
    try {
      scope?.end(settled === 'released' || settled === 'abandoned' ? 'rejected' : settled)
    } finally {
      this.#finished(task)
    }
  }

  /** Only a defect in the engine itself gets here: hand the message back, never lose it. */
  #defect(task: DeliveryTask, scope: ProcessScope | undefined, error: unknown): void {
    try {
      task.delivery.nack(true)
      scope?.end('rejected', error)
    } finally {
      this.#finished(task)
    }
  }

  /**
   * The common case without a promise around it: a consumer (an ordered one's partition too) with
   * no idempotency store, not a pipeline step, whose delivery decodes. Undefined otherwise:
   * {@link #handle} takes it, and a body that does not decode is decoded there again and parked
   * with the reason.
   */
  #handlePlain(handling: Handling): Settled | Promise<Settled> | undefined {
    // A pipeline step forwards what it accepts: #handle does that. An ordered consumer's run
    // that fails goes on in place (#settleHandled), one that succeeds is settled here.
    if (this.#options.store !== undefined || this.#step !== undefined) return undefined
    const { delivery } = handling.task
    const codec = this.#host.codecs.find(delivery.properties.contentType)
    // An asynchronous decode (a claim check, §17) is #handle's.
    if (codec === undefined || codec.decodeAsync !== undefined) return undefined
    let payload: T
    try {
      payload = codec.decode(delivery.body) as T
    } catch {
      return undefined
    }
    const message = this.#message(handling, payload)
    const result = this.#runHandler(handling, message)
    if (!(result instanceof Promise)) return this.#settleHandled(handling, message, result)
    return result.then((settled) => this.#settleHandled(handling, message, settled))
  }

  /** What {@link #handle} does after the handler, for a plain or an ordered consumer. */
  #settleHandled(
    handling: Handling,
    message: Message<T>,
    result: AckResult,
  ): Settled | Promise<Settled> {
    if (handling.task.abandoned) return 'abandoned'
    if (this.#inPlace !== undefined && (result.kind === 'retry' || result.kind === 'release')) {
      return this.#runAgainInPlace(this.#inPlace, handling, message, result)
    }
    return this.#settle(handling, result)
  }

  #message({ task: { delivery }, envelope, headers }: Handling, payload: T): Message<T> {
    return {
      payload,
      envelope,
      headers,
      queue: this.queue,
      contentType: delivery.properties.contentType,
      body: delivery.body,
      redelivered: delivery.redelivered,
    }
  }

  async #handle(handling: Handling): Promise<Settled> {
    const { task, envelope } = handling
    const { delivery } = task
    const contentType = delivery.properties.contentType
    const codec = this.#host.codecs.find(contentType)
    if (codec === undefined) {
      const reason = `could not decode: no codec for content type '${contentType ?? ''}'`
      return this.#setAside(handling, 'parked', reason)
    }
    let payload: T
    try {
      payload = (
        codec.decodeAsync === undefined
          ? codec.decode(delivery.body)
          : await codec.decodeAsync(delivery.body)
      ) as T
    } catch (error) {
      // A claim-check store that did not answer may on the next attempt: retried, not parked (§17).
      if (codec.decodeAsync !== undefined && errorCodeOf(error) !== ErrorCodes.DECODE) {
        return this.#retry(handling, {
          kind: 'retry',
          reason: describeError(error),
          delayMs: undefined,
        })
      }
      return this.#setAside(handling, 'parked', `could not decode: ${describeError(error)}`)
    }

    const store = this.#options.store
    // Each claim has its own owner, so a release can only ever free this delivery's claim.
    const owner = store === undefined ? undefined : randomUUID()
    const message = this.#message(handling, payload)
    // A pipeline step claims `{pipeline}.{step}:{id}` (one run's id is on every step's
    // message), with the route position when the route revisits the step: it reads the
    // message's route first, so `arrived` comes just before `claimKey`.
    this.#step?.arrived(message as Message<unknown>, delivery.wireHeaders ?? delivery.headers)
    const key = this.#step === undefined ? envelope.id : this.#step.claimKey(envelope.id)
    if (store !== undefined) {
      try {
        assertIdempotencyKey(key)
      } catch (error) {
        // No store can ever claim it: asking again would put it back for ever.
        const reason = `invalid message id: ${describeError(error)}`
        return this.#setAside(handling, 'parked', reason)
      }
      let claim: ClaimResult
      try {
        claim = await this.#claim(store, key, owner as string)
      } catch (error) {
        if (errorCodeOf(error) === ErrorCodes.CONFIGURATION) {
          const reason = `the idempotency store refused the message id: ${describeError(error)}`
          return this.#setAside(handling, 'parked', reason)
        }
        // The store could not answer: nothing ran, so put the message back unchanged and
        // ask again later. It is never acked unhandled, and spends no attempt.
        this.#storeFailed(error, `the idempotency store could not claim message ${envelope.id}`)
        return this.#putBack(handling, this.#options.inProgressDelayMs, 'retried')
      }
      this.#storeFailure = undefined
      if (claim === 'duplicate') {
        delivery.ack()
        return 'acked'
      }
      if (claim === 'in_progress') {
        return this.#putBack(handling, this.#options.inProgressDelayMs, 'in_progress')
      }
      if (delivery.settleable === false) {
        // The channel went while the store answered: the broker has the message back.
        this.#release(store, key, owner)
        return 'released'
      }
    }

    const result = await this.#runHandler(handling, message)
    if (task.abandoned) return 'abandoned'
    if (this.#inPlace !== undefined && (result.kind === 'retry' || result.kind === 'release')) {
      return this.#runAgainInPlace(this.#inPlace, handling, message, result)
    }
    if (this.#step !== undefined && result.kind === 'accept') {
      return this.#forward(this.#step, handling, message, { store, key, owner })
    }

    if (store !== undefined) {
      if (result.kind === 'accept') await this.#confirm(store, key, owner as string)
      else this.#release(store, key, owner)
    }
    return this.#settle(handling, result)
  }

  /**
   * A pipeline step's accepted delivery (see {@link StepHook}): the next step's message is
   * published and confirmed, then the claim is confirmed, then the delivery is acked. A hop
   * that fails is held and tried again like a failed move, without running the step again; one
   * that can never be written as it is parks the delivery with the reason. Either way the
   * claim is released unless the hop was confirmed.
   */
  async #forward(
    step: StepHook,
    handling: Handling,
    message: Message<T>,
    claim: {
      readonly store: IdempotencyStore | undefined
      readonly key: string
      readonly owner: string | undefined
    },
  ): Promise<Settled> {
    const { task } = handling
    const { store, key, owner } = claim
    const hop = step.nextHop(message as Message<unknown>)
    if (hop !== undefined) {
      const published = await this.#publishHop(handling, hop)
      if (published !== 'moved') {
        if (store !== undefined) this.#release(store, key, owner)
        return published
      }
    }
    if (store !== undefined) await this.#confirm(store, key, owner as string)
    if (task.abandoned) return 'abandoned'
    task.delivery.ack()
    step.acked(message as Message<unknown>)
    return 'acked'
  }

  async #publishHop(handling: Handling, hop: Hop): Promise<Settled | 'moved'> {
    // Named by the queue it reaches: a hop through a pipeline's exchange goes, by the family's
    // layout, to `{pipeline}.{step}` (docs/design.md §15).
    const { exchange, routingKey } = hop.message
    const target = exchange === '' ? routingKey : `${exchange}.${routingKey}`
    const publish = (): Promise<void> =>
      this.#host.transport.publish(hop.message, {
        whenBlocked: 'wait',
        signal: this.#host.closingSignal,
        lane: 'engine',
      })
    let failure: unknown
    try {
      await publish()
      hop.ended(undefined)
      return 'moved'
    } catch (first) {
      failure = first
    }
    if (isPermanent(failure)) {
      hop.ended(failure)
      const reason = `could not publish the next step's message to '${target}': ${describeError(failure)}`
      return this.#setAside(handling, 'parked', reason)
    }
    const published = await this.#tryAgain(
      handling.task,
      target,
      handling.envelope.id,
      publish,
      hop.declarations,
      failure,
    )
    hop.ended(published ? undefined : failure)
    return published ? 'moved' : 'released'
  }

  /**
   * An ordered consumer's failed run (see {@link InPlaceFailures}): a failure is never put back;
   * the delivery is held and its handler run again in place, halted until resumed, or moved to
   * `{queue}.dlq`, as the hook decides. A hold cut short leaves the delivery unsettled: the
   * channel's close (or its loss) gives it back to the queue in its place.
   */
  async #runAgainInPlace(
    inPlace: InPlaceFailures,
    handling: Handling,
    message: Message<T>,
    firstResult: AckResult,
  ): Promise<Settled> {
    const { task, scope } = handling
    let result = firstResult
    for (let failures = 1; ; failures++) {
      if (result.kind !== 'retry' && result.kind !== 'release') {
        return this.#settle(handling, result)
      }
      const reason = result.kind === 'retry' ? result.reason : 'released by the handler'
      const step = inPlace.failed(message as Message<unknown>, failures, reason)
      if (step.kind === 'give-up') {
        return this.#setAside(handling, 'dead_lettered', step.reason)
      }
      const cut = await this.#hold(task, step.kind === 'again' ? step.delayMs : step.until)
      if (cut !== undefined) {
        inPlace.holdEnded(message as Message<unknown>, cut)
        return 'released'
      }
      if (step.kind === 'again') scope?.retried(step.delayMs, false)
      // A resumed halt starts counting again.
      else failures = 0
      result = await this.#runHandler(handling, message)
      if (task.abandoned) return 'abandoned'
    }
  }

  /** Holds the delivery outside the handler slots: not in `inFlight`, not waited for by a drain. */
  async #hold(task: DeliveryTask, until: number | Promise<unknown>): Promise<HoldEnd | undefined> {
    const hold = new Hold(task.delivery)
    this.#holds.add(hold)
    this.#startWaiting(task, false)
    try {
      return await hold.wait(until, this.#closeWaits.signal, () => this.#host.consumingPaused)
    } finally {
      this.#holds.delete(hold)
      this.#stopWaiting(task)
    }
  }

  /** Asks the store for a claim, bounded by the store timeout. */
  #claim(store: IdempotencyStore, id: string, owner: string): Promise<ClaimResult> {
    const claim = claimWith(store, id, owner)
    return withTimeout(claim, this.#options.storeTimeoutMs, `claiming message ${id}`, () => {
      // A claim that lands after its timeout belongs to nobody: give it back at once.
      claim.then(
        (result) => {
          if (result === 'claimed') this.#release(store, id, owner)
        },
        () => undefined,
      )
    })
  }

  /**
   * Releases this delivery's claim, in the background. A release that fails is tried again as a
   * confirm is: a claim left behind holds its message in progress (put back again and again)
   * until its lease runs out. If it still fails the claim is left to expire, and the failure
   * reported. The owner check keeps a late release from freeing anyone else's claim.
   */
  #release(store: IdempotencyStore, id: string, owner: string | undefined): void {
    void this.#withStoreRetries(
      () => store.release(id, owner),
      `releasing message ${id}`,
      `could not release message ${id}`,
    )
  }

  #storeFailed(error: unknown, context: string): void {
    this.#storeFailure = describeError(error)
    this.#host.reportError(error, context)
  }

  /**
   * Records the work as done. A confirm that fails is tried again a few times: an id left
   * unconfirmed becomes claimable once its lease runs out, and a second copy of the message (a
   * publisher that resent after a lost confirm) would then run the handler again. If it still
   * fails the message is acked all the same — the work is done — and the failure reported.
   */
  async #confirm(store: IdempotencyStore, id: string, owner: string): Promise<void> {
    await this.#withStoreRetries(
      () => store.confirm(id, owner),
      `confirming message ${id}`,
      `could not confirm message ${id}`,
    )
  }

  /**
   * Runs a store call, each try bounded by the store timeout, tried again after each of
   * {@link STORE_RETRY_DELAYS_MS} (not once the connection is closing); the last failure is
   * reported (`failed`) and the store marked failing. A success clears that mark.
   */
  async #withStoreRetries(
    call: () => Promise<unknown>,
    doing: string,
    failed: string,
  ): Promise<void> {
    let last: unknown
    for (let attempt = 0; attempt <= STORE_RETRY_DELAYS_MS.length; attempt++) {
      if (attempt > 0) {
        const wait = STORE_RETRY_DELAYS_MS[attempt - 1] as number
        if (!(await sleep(wait, this.#host.closingSignal))) break
      }
      try {
        await withTimeout(call(), this.#options.storeTimeoutMs, doing)
        this.#storeFailure = undefined
        return
      } catch (error) {
        last = error
      }
    }
    this.#storeFailed(last, failed)
  }

  /**
   * Runs the handler and reads what it returned. Not async: what a handler returns without a
   * promise is read at once, with no promise made for it (on Node 20 every promise also runs
   * the AsyncLocalStorage's hooks).
   */
  #runHandler({ task, scope }: Handling, message: Message<T>): AckResult | Promise<AckResult> {
    const started = scope === undefined ? 0 : performance.now()
    let returned: unknown
    try {
      // No closure per message: run() passes the arguments on.
      returned = this.#host.currentTask.run(
        task,
        invokeHandler,
        this.#handler,
        message,
        this.#context,
        scope,
      )
    } catch (error) {
      return handlerFailed(error, scope, started)
    }
    if (!isThenable(returned)) return handlerReturned(returned, scope, started)
    return Promise.resolve(returned).then(
      (value) => handlerReturned(value, scope, started),
      (error: unknown) => handlerFailed(error, scope, started),
    )
  }

  /** Not async: an accepted message is acked without a promise around it. */
  #settle(handling: Handling, result: AckResult): Settled | Promise<Settled> {
    const { delivery } = handling.task
    switch (result.kind) {
      case 'accept':
        delivery.ack()
        return 'acked'
      case 'release':
        delivery.nack(true)
        return 'released'
      case 'dead-letter':
        return this.#setAside(
          handling,
          INVALID_RESULTS.has(result) ? 'invalid' : 'rejected',
          result.reason,
        )
      case 'park':
        return this.#setAside(handling, 'parked', result.reason)
      case 'retry':
        return this.#retry(handling, result)
    }
  }

  async #retry(
    handling: Handling,
    result: Extract<AckResult, { kind: 'retry' }>,
  ): Promise<Settled> {
    const { task, envelope, scope } = handling
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
        return this.#setAside(handling, 'dead_lettered', `${why}: ${result.reason}`)
      }
      delayMs = wait.delayMs
      if (wait.inBroker) target = rungQueueName(this.queue, wait.delayMs)
    }
    if (target === this.queue && !(await this.#wait(task, delayMs, true))) {
      // A drain or close cut the wait short: hand the message back as it came, attempt
      // unchanged. (A lost channel has handed it back already.)
      task.delivery.nack(true)
      return 'released'
    }
    const next: Envelope = {
      ...envelope,
      attempt: envelope.attempt + 1,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.#move(task, target, next, undefined)
    if (moved !== 'moved') return moved
    scope?.retried(delayMs, target !== this.queue)
    return 'retried'
  }

  /** In progress (or a store that could not answer): wait, then put back with the attempt unchanged. */
  async #putBack(
    handling: Handling,
    delayMs: number,
    outcome: 'in_progress' | 'retried',
  ): Promise<Settled> {
    const { task, envelope, scope } = handling
    if (!(await this.#wait(task, delayMs, true))) {
      task.delivery.nack(true)
      return 'released'
    }
    const copy: Envelope = {
      ...envelope,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.#move(task, this.queue, copy, undefined)
    if (moved !== 'moved') return moved
    if (outcome === 'retried') scope?.retried(delayMs, false)
    return outcome
  }

  async #setAside(
    handling: Handling,
    outcome: 'dead_lettered' | 'rejected' | 'parked' | 'invalid',
    reason: string,
  ): Promise<Settled> {
    const target =
      outcome === 'parked' ? parkedQueueName(this.queue) : deadLetterQueueName(this.queue)
    const moved = await this.#move(handling.task, target, handling.envelope, reason)
    if (moved !== 'moved') return moved
    handling.scope?.setAside(outcome, target, reason)
    return outcome
  }

  /**
   * Republishes a copy to `target` through the default exchange, mandatory and persistent,
   * and acks the original only once the broker has confirmed and routed the copy.
   *
   * A copy that fails is tried again in this process, with backoff, while the delivery's
   * channel lives: the missing destination is declared again, the failure is reported and
   * health turns DEGRADED. The original is never handed back with requeue to spin (on a quorum
   * queue every requeue spends the broker's delivery limit); it goes back only when the
   * consumer closes. A copy that can never be written as it is (a header the client cannot
   * encode) is parked instead, without its application headers. The publish is tied to the
   * connection's lifetime, not the handler's signal, so a message given up on during shutdown
   * still reaches its dead-letter queue.
   */
  async #move(
    task: DeliveryTask,
    target: string,
    envelope: Envelope,
    error: string | undefined,
  ): Promise<'moved' | 'parked' | 'released'> {
    const { delivery } = task
    let failure: unknown
    try {
      await this.#publishCopy(delivery, target, envelope, error, true)
    } catch (first) {
      failure = first
    }
    if (failure === undefined) {
      if (!task.abandoned) delivery.ack()
      return 'moved'
    }
    if (isPermanent(failure) && !task.abandoned) {
      const parked = parkedQueueName(this.queue)
      const reason = `could not republish to '${target}' as it is (${describeError(failure)}); its application headers were dropped${error === undefined ? '' : `: ${error}`}`
      try {
        await this.#publishCopy(delivery, parked, envelope, reason, false)
        delivery.ack()
        return 'parked'
      } catch (second) {
        failure = second
      }
    }
    const moved = await this.#tryAgain(
      task,
      target,
      envelope.id,
      () => this.#publishCopy(delivery, target, envelope, error, true),
      consumerDeclarations(this.queue, this.#options.retryPolicy),
      failure,
    )
    if (!moved) return 'released'
    if (!task.abandoned) delivery.ack()
    return 'moved'
  }

  /**
   * Tries a failed publish of a copy (or a pipeline hop) to `target` again, with backoff, while
   * the delivery's channel lives; `declarations` are declared again first when it came back
   * unroutable. True once it is published (the caller acks); false when closing or the lost
   * channel ended it, the delivery handed back.
   */
  async #tryAgain(
    task: DeliveryTask,
    target: string,
    id: string,
    publish: () => Promise<void>,
    declarations: readonly Declaration[],
    firstFailure: unknown,
  ): Promise<boolean> {
    const { delivery } = task
    let failure = firstFailure
    let triedRedeclared = false
    this.#failingMoves.set(target, (this.#failingMoves.get(target) ?? 0) + 1)
    try {
      for (let attempt = 1; ; attempt++) {
        if (task.abandoned) return false
        this.#host.reportError(
          failure,
          `could not move message ${id} to '${target}' (try ${attempt}); it is held and tried again`,
        )
        let redeclared = false
        const code = errorCodeOf(failure)
        // A pipeline hop goes through the pipeline's exchange, which can be deleted too.
        if (code === ErrorCodes.UNROUTABLE || code === ErrorCodes.EXCHANGE_NOT_FOUND) {
          if (target.startsWith(`${this.queue}.retry.`)) {
            this.#host.instrumentation?.rungMissing?.(this.queue, target)
          }
          // The destination is gone (someone deleted it): declare it again, and if that
          // worked, try at once rather than after the backoff.
          redeclared = await this.#host.transport.declare(declarations).then(
            () => true,
            (declareError: unknown) => {
              this.#host.reportError(declareError, `could not declare '${target}' again`)
              return false
            },
          )
        }
        // Once only: a destination that is declared but still does not route must not spin.
        const backoff = redeclared && !triedRedeclared ? 0 : moveBackoff(attempt)
        triedRedeclared ||= redeclared
        if (!(await this.#wait(task, backoff, false))) {
          // Closing (or the channel is gone, and the broker has the message back already).
          if (!task.abandoned) delivery.nack(true)
          return false
        }
        try {
          await publish()
          return true
        } catch (next) {
          failure = next
        }
      }
    } finally {
      const left = (this.#failingMoves.get(target) ?? 1) - 1
      if (left > 0) this.#failingMoves.set(target, left)
      else this.#failingMoves.delete(target)
    }
  }

  #publishCopy(
    delivery: Delivery,
    target: string,
    envelope: Envelope,
    error: string | undefined,
    keepHeaders: boolean,
  ): Promise<void> {
    return this.#host.transport.publish(
      {
        exchange: '',
        routingKey: target,
        body: delivery.body,
        headers: writeCopyHeaders(
          keepHeaders ? (delivery.wireHeaders ?? delivery.headers) : {},
          envelope,
          error === undefined ? undefined : { error },
        ),
        properties: republishedProperties(delivery.properties, envelope.id),
        persistent: true,
        mandatory: true,
      },
      { whenBlocked: 'wait', signal: this.#host.closingSignal, lane: 'engine' },
    )
  }
}

/** Backoff before the n-th retry of a failed move: 1 s, 2 s, 4 s … up to 30 s. */
function moveBackoff(attempt: number): number {
  return Math.min(FIRST_MOVE_BACKOFF_MS * 2 ** Math.min(attempt - 1, 20), MAX_MOVE_BACKOFF_MS)
}

/** A failure that sending the same copy again can never fix. */
function isPermanent(error: unknown): boolean {
  const code = errorCodeOf(error)
  return code === ErrorCodes.CONFIGURATION || code === ErrorCodes.UNENCODABLE
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

/** A handler that returned (or resolved): its result, or accept for anything but an `Ack`. */
function handlerReturned(
  returned: unknown,
  scope: ProcessScope | undefined,
  started: number,
): AckResult {
  scope?.handled(performance.now() - started, undefined)
  return isAckResult(returned) ? returned : ACCEPT
}

/** The dead-letter results made for a payload its schema refused: their outcome is `invalid`. */
const INVALID_RESULTS = new WeakSet<AckResult>()

/** A handler that threw (or rejected): `FatalError` dead-letters, anything else retries. */
function handlerFailed(
  error: unknown,
  scope: ProcessScope | undefined,
  started: number,
): AckResult {
  scope?.handled(performance.now() - started, error)
  const code = errorCodeOf(error)
  if (code === ErrorCodes.FATAL) return { kind: 'dead-letter', reason: describeError(error) }
  if (code === ErrorCodes.INVALID_PAYLOAD) {
    // A payload its schema refused: dead-lettered like a FatalError, counted `invalid` (§17).
    const invalid: AckResult = { kind: 'dead-letter', reason: describeError(error) }
    INVALID_RESULTS.add(invalid)
    return invalid
  }
  return { kind: 'retry', reason: describeError(error), delayMs: undefined }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  )
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

/** How long to wait before each retry of a failed confirm or release. */
const STORE_RETRY_DELAYS_MS = [100, 500, 2_000] as const

/**
 * Rejects with an `ACEMQ_STORE_TIMEOUT` error when `promise` has not settled within `ms`
 * (`onTimeout` then runs); otherwise settles as `promise` does.
 */
function withTimeout<R>(
  promise: Promise<R>,
  ms: number,
  what: string,
  onTimeout?: () => void,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.()
      reject(
        new AceMqError(`the idempotency store did not answer within ${ms} ms (${what})`, {
          code: ErrorCodes.STORE_TIMEOUT,
        }),
      )
    }, ms)
    timer.unref?.()
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

/**
 * The drain of a close, a consumer's or the connection's: waits up to `drainTimeoutMs` for
 * `idle()`, then aborts the handlers' signals and waits {@link HANDLER_ABANDON_TIMEOUT} more,
 * then gives up on the handlers still running (their late outcomes are discarded).
 */
export async function drainOrAbandon(
  consumers: readonly Pick<ConsumerEngine<unknown>, 'abortHandlers' | 'abandonRunning'>[],
  idle: () => Promise<unknown>,
  drainTimeoutMs: number,
): Promise<void> {
  if (await waitFor(idle(), drainTimeoutMs)) return
  for (const consumer of consumers) consumer.abortHandlers()
  if (await waitFor(idle(), HANDLER_ABANDON_TIMEOUT)) return
  for (const consumer of consumers) consumer.abandonRunning()
}

/**
 * How long a close still waits for handlers it did not drain (those waiting inside a drain or
 * close): what is left of its drain, and never less than the abandon grace.
 */
export function graceUntil(deadline: number): number {
  return Math.max(deadline - Date.now(), HANDLER_ABANDON_TIMEOUT)
}

/**
 * Resolves true when `promise` settles within `ms`, false otherwise. Any length works: waits
 * past setTimeout's 2^31−1 ms limit are taken in steps.
 */
export async function waitFor(promise: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms <= 0) {
    let done = false
    void promise.then(() => (done = true))
    await Promise.resolve()
    return done
  }
  const stop = new AbortController()
  try {
    return await Promise.race([
      promise.then(() => true as const),
      sleep(ms, stop.signal).then(() => false as const),
    ])
  } finally {
    stop.abort()
  }
}
