import type { ConsumerEngine } from '../consumer/consumer-engine.js'
import type { TaskSet } from '../consumer/consumer-host.js'
import type { DeliveryTask } from '../consumer/delivery-task.js'
import { drainOrAbandon, graceUntil, waitFor } from '../consumer/drain.js'
import { settlesWithin } from '../internal/timers.js'

/** What closing a connection works through, and the steps it leaves to the connection. */
export interface Closing {
  /** The connection's consumers; cleared once their channels have closed. */
  readonly consumers: Set<ClosingConsumer>
  /** The outbox relays that finish their round within the drain. */
  readonly relays: Iterable<{ stop(): Promise<void> }>
  /** Handlers waiting inside a drain or close: the drain does not wait for them. */
  readonly inside: TaskSet
  /** Stops new deliveries from starting. */
  pauseConsuming(): void
  /** Every handler but the ones waiting inside has drained: close() callers are answered. */
  othersDrained(): void
  /** The drain is over: publishes from here on are refused, and signals aborted. */
  endPublishing(): void
  /** Closes the transport. */
  closeTransport(): Promise<void>
  /** Whatever happens to the transport's close: the last of the cleanup. */
  finished(): void
}

/** What closing asks of each consumer. */
export type ClosingConsumer = Pick<
  ConsumerEngine<unknown>,
  'stopIntake' | 'whenIdle' | 'abortHandlers' | 'abandonRunning' | 'closeChannel'
>

const NO_TASKS: ReadonlySet<DeliveryTask> = new Set()

/**
 * The close sequence (docs/design.md §8): intake stops, handlers drain within
 * `drainTimeoutMs` (then their signals are aborted, and after a grace they are given up on),
 * relays finish their round, publishing ends, channels close, then the transport.
 */
export async function closeSequence(closing: Closing, drainTimeoutMs: number): Promise<void> {
  const deadline = Date.now() + drainTimeoutMs
  closing.pauseConsuming()
  // Relays finish their round (publishes confirmed and marked) within the drain's budget.
  const relaysStopped = Promise.all([...closing.relays].map((relay) => relay.stop()))
  const consumers = [...closing.consumers]
  await Promise.all(consumers.map((c) => c.stopIntake()))
  const idle = (except: TaskSet): Promise<void> =>
    Promise.all(consumers.map((c) => c.whenIdle(except))).then(() => undefined)
  await drainOrAbandon(consumers, () => idle(closing.inside), drainTimeoutMs)
  closing.othersDrained()
  // Handlers waiting inside a drain or close were not waited for (the ones that called close()
  // were answered just now): give them what is left of the drain (at least the abandon grace)
  // to return and settle before their channels close. Asked of every handler, not only of
  // those still inside: a drain from inside can answer in the same turn as the wait above,
  // and its caller, gone from the set, is still running (simulation findings 8 and 9).
  if (!(await waitFor(idle(NO_TASKS), graceUntil(deadline)))) {
    for (const consumer of consumers) consumer.abandonRunning()
  }
  await settlesWithin(relaysStopped, drainTimeoutMs)
  // The drain is over: from here on only publishes already on their way go through.
  closing.endPublishing()
  await Promise.all(consumers.map((c) => c.closeChannel()))
  closing.consumers.clear()
  try {
    await closing.closeTransport()
  } finally {
    closing.finished()
  }
}
