import type { ConsumerHost, TaskSet } from './consumer-host.js'
import type { DeliveryTask } from './delivery-task.js'

/**
 * A consumer's tasks by kind: those that run a handler or settle (counted in `inFlight`, bounded
 * by `concurrency`), and those that wait out a delay (counted in `waiting`, bounded only by the
 * prefetch window) — and the drains and closes waiting for the first kind to end.
 */
export class TaskSlots {
  /** The connection, told of every change to the count of running tasks. */
  readonly #host: Pick<ConsumerHost, 'inFlightChanged'>
  readonly #running = new Set<DeliveryTask>()
  /** Tasks waiting out a delay, and whether a drain ends the wait (a failed move's does not). */
  readonly #waiting = new Map<DeliveryTask, boolean>()
  readonly #idleWaiters = new Set<() => void>()

  constructor(host: Pick<ConsumerHost, 'inFlightChanged'>) {
    this.#host = host
  }

  get running(): number {
    return this.#running.size
  }

  get waiting(): number {
    return this.#waiting.size
  }

  /** Whether `task` runs a handler or settles now. */
  isRunning(task: DeliveryTask): boolean {
    return this.#running.has(task)
  }

  /** `task` starts running. */
  started(task: DeliveryTask): void {
    this.#running.add(task)
    this.#host.inFlightChanged(1)
  }

  /** The task stops counting as running while it waits. False when it was not running. */
  startWaiting(task: DeliveryTask, drainable: boolean): boolean {
    if (!this.#running.delete(task)) return false
    this.#waiting.set(task, drainable)
    this.#host.inFlightChanged(-1)
    this.notifyIdle()
    return true
  }

  /** The wait is over: the task settles, and counts as running again until it has. */
  stopWaiting(task: DeliveryTask): void {
    if (!this.#waiting.delete(task)) return
    this.#running.add(task)
    this.#host.inFlightChanged(1)
  }

  /** The task's settlement is done (the caller then tells the waiting drains: {@link notifyIdle}). */
  finished(task: DeliveryTask): void {
    if (this.#running.delete(task)) this.#host.inFlightChanged(-1)
    this.#waiting.delete(task)
  }

  /**
   * Counts the waiting tasks a drain (or, with `all`, a close) is about to wake as running
   * again, right now: they settle (hand their delivery back) before the drain may answer.
   */
  wakeWaiting(all: boolean): void {
    for (const [task, drainable] of this.#waiting) {
      if (!drainable && !all) continue
      this.#waiting.delete(task)
      this.#running.add(task)
      this.#host.inFlightChanged(1)
    }
  }

  /** Gives up on every task: their late outcomes are discarded. Answers how many were running. */
  abandon(): number {
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
    this.notifyIdle()
    return abandoned.length
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

  /** Lets the drains and closes waiting look again. */
  notifyIdle(): void {
    // Only a drain or close is ever waiting: skip the copy on every other message.
    if (this.#idleWaiters.size > 0) for (const check of [...this.#idleWaiters]) check()
  }
}
