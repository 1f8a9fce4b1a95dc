import { DEFAULT_DRAIN_TIMEOUT } from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { sleep } from '../internal/timers.js'
import type { Delivery, SubscriptionStatus } from '../transport/transport.js'
import { Claims } from './claims.js'
import type { ConsumerHost, ConsumerTrouble, TaskSet } from './consumer-host.js'
import type { ConsumerOptions } from './consumer-options.js'
import { intakeOpen, moveState, type ConsumerState } from './consumer-state.js'
import type { DeliveryHook, HoldEnd } from './delivery-hook.js'
import { DeliveryProcessor } from './delivery-processor.js'
import type { DeliveryTask, TaskWaits } from './delivery-task.js'
import { drainOrAbandon, graceUntil, reportAbandoned, waitFor } from './drain.js'
import { Hold } from './hold.js'
import { cancelLane, type Lane } from './lane.js'
import type { Consumer } from './consumer.js'
import type { Handler } from './message.js'
import { Mover, moveBackoff } from './mover.js'
import { TaskSlots } from './task-slots.js'

/**
 * The engine's lifecycle and its pump: subscribes, takes deliveries into its buffer, hands them
 * to {@link DeliveryProcessor} as handler slots free up, pauses, lets go and subscribes again,
 * drains and closes. What happens to one delivery is the processor's; copies and moves are the
 * {@link Mover}'s; idempotency claims the {@link Claims}'; a feature built on the engine reaches
 * it only through its {@link DeliveryHook} (docs/design.md §13, "One seam").
 *
 * Two kinds of task hold a delivery: one that runs a handler or settles (counted in
 * `inFlight`, bounded by `concurrency`), and one that waits out a delay (counted in `waiting`,
 * bounded only by the prefetch window). A wait never blocks the deliveries behind it.
 */
export class ConsumerEngine<T> implements Consumer {
  readonly queue: string
  readonly #host: ConsumerHost
  readonly #options: ConsumerOptions
  readonly #buffer: { readonly delivery: Delivery; readonly lane: Lane }[] = []
  readonly #slots: TaskSlots
  readonly #lanes = new Set<Lane>()
  /** Ends retry, in-progress and store waits at once: a drain or a close. */
  #drainWaits = new AbortController()
  /** Ends every wait, failed moves included: a close. */
  readonly #closeWaits = new AbortController()
  /** The handlers' signal: aborted once the drain time is over. */
  readonly #handlerAbort = new AbortController()
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
  /**
   * Whether its hook holds failed deliveries in place (see {@link DeliveryHook}): then it never
   * cancels its subscription nor hands deliveries back one by one; its channel's close does.
   */
  readonly #inPlace: boolean
  /** Deliveries held in place after a failure. */
  readonly #holds = new Set<Hold>()
  readonly #claims: Claims
  readonly #mover: Mover
  readonly #processor: DeliveryProcessor<T>

  /** `hook`: what a feature built on the engine does around each delivery (internal to core). */
  constructor(
    host: ConsumerHost,
    queue: string,
    options: ConsumerOptions,
    handler: Handler<T>,
    hook?: DeliveryHook,
  ) {
    this.#host = host
    this.queue = queue
    this.#options = options
    this.#inPlace = hook?.failed !== undefined
    this.#slots = new TaskSlots(host)
    const waits: TaskWaits = {
      wait: (task, ms, drainable) => this.#wait(task, ms, drainable),
      hold: (task, until) => this.#hold(task, until),
      finished: (task) => this.#finished(task),
    }
    this.#claims = new Claims(host, options.storeTimeoutMs)
    this.#mover = new Mover(host, queue, options, waits)
    // What every handler of this consumer is given besides its message.
    const context = Object.freeze({ signal: this.#handlerAbort.signal, queue })
    const [mover, claims] = [this.#mover, this.#claims]
    const parts = { host, queue, options, handler, context, waits, mover, claims }
    this.#processor = new DeliveryProcessor<T>(parts, hook)
  }

  /** The one place the state changes (see {@link moveState}). */
  #moveTo(next: ConsumerState): void {
    this.#state = moveState(this.queue, this.#state, next)
  }

  get inFlight(): number {
    return this.#slots.running
  }

  get held(): number {
    return this.#host.consumingPaused || !intakeOpen(this.#state) ? this.#buffer.length : 0
  }

  get waiting(): number {
    return this.#slots.waiting
  }

  /** Messages an interceptor refused (moved to `{queue}.dlq`). */
  get refused(): number {
    return this.#processor.refused
  }

  /** What this consumer is struggling with, or undefined when nothing. */
  trouble(): ConsumerTrouble | undefined {
    const unsubscribed = intakeOpen(this.#state) && this.#lane !== undefined && this.#lane.lost
    const storeFailure = this.#claims.failure
    if (!unsubscribed && !this.#mover.failing && storeFailure === undefined) return undefined
    return { queue: this.queue, unsubscribed, failingMoves: this.#mover.failingMoves, storeFailure }
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
      this.#slots.running < this.#options.concurrency &&
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
    if (this.#holdTimer !== undefined || !intakeOpen(this.#state) || this.#inPlace) return
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
    return this.#slots.isRunning(task)
  }

  /** Running tasks, other than those in `except` (a drain or close called from inside handlers). */
  busy(except: TaskSet): number {
    return this.#slots.busy(except)
  }

  /** Resolves once {@link busy} is zero. `except` is read again at every check. */
  whenIdle(except: TaskSet): Promise<void> {
    return this.#slots.whenIdle(except)
  }

  /** Looks again whether a drain or close is done (the set it excludes grew). */
  recheckIdle(): void {
    this.#slots.notifyIdle()
  }

  /** A drain: deliveries waiting out a retry, in-progress or store delay go back at once. */
  endWaits(): void {
    this.#slots.wakeWaiting(false)
    this.#drainWaits.abort()
    // Once a close has stopped intake, the ended signal stays: a wait begun after it ends at
    // once, as the close ended every wait before it (simulation finding 14).
    if (intakeOpen(this.#state)) this.#drainWaits = new AbortController()
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
    this.#slots.wakeWaiting(true)
    this.#drainWaits.abort()
    this.#closeWaits.abort()
    await Promise.all([...this.#lanes].map((lane) => this.#cancel(lane)))
    // Anything that arrived while the cancel was on its way goes back too.
    this.#requeueBuffered()
  }

  /** Stops new deliveries on `lane`, bounded: a hung broker must not hold a close open. */
  #cancel(lane: Lane): Promise<void> {
    // An ordered consumer stops by closing its channel once idle, never by a cancel (see paused()).
    return this.#inPlace ? Promise.resolve() : cancelLane(lane, this.#host, this.queue)
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

  /**
   * Gives up on the handlers still running: their late outcomes are discarded, and the broker
   * has their messages back once the channel closes. Said once: a handler that hangs through a
   * close is something to look at (docs/design.md §23).
   */
  abandonRunning(): void {
    reportAbandoned(this.#host, this.queue, this.#slots.abandon())
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
    const inside = caller !== undefined && this.#slots.isRunning(caller)
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
    for (const task of this.#closers)
      if (this.#slots.isRunning(task) && !task.abandoned) return true
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
      if (!this.#inPlace) delivery.nack(true)
      return
    }
    this.#buffer.push({ delivery, lane })
    if (this.#host.consumingPaused) this.paused()
    else this.pump()
  }

  #requeueBuffered(): void {
    const buffered = this.#buffer.splice(0)
    // An ordered consumer leaves them to its channel's close (see #onDelivery).
    if (!this.#inPlace) for (const { delivery } of buffered) delivery.nack(true)
  }

  #start(delivery: Delivery, lane: Lane): void {
    const task: DeliveryTask = {
      consumer: this as ConsumerEngine<unknown>,
      delivery,
      lane,
      abandoned: false,
    }
    lane.tasks++
    this.#slots.started(task)
    // A delivery started from inside a handler's async context (a handler that resumed
    // consuming, or a transport that delivered from a publish) must not inherit that
    // handler's identity: "am I inside a handler?" is answered per task. Not exit(): on Node 20
    // it only disables the storage, and the handler's own run() inside enables it again, so the
    // settlement after it would still see the outer handler.
    if (this.#host.currentTask.getStore() === undefined) this.#processor.process(task)
    else this.#host.currentTask.run(undefined, () => this.#processor.process(task))
  }

  /** The task stops counting as running while it waits; other deliveries take its place. */
  #startWaiting(task: DeliveryTask, drainable: boolean): void {
    if (this.#slots.startWaiting(task, drainable)) this.pump()
  }

  #finished(task: DeliveryTask): void {
    this.#slots.finished(task)
    task.lane.tasks--
    this.#retireIfIdle(task.lane)
    this.#slots.notifyIdle()
    if (this.#state === 'closingWhenIdle' && this.#slots.running === 0) void this.closeChannel()
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
      this.#slots.stopWaiting(task)
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
      this.#slots.stopWaiting(task)
    }
  }
}
