import type { Envelope } from '../envelope/envelope.js'
import type { ConsumeOutcome, ProcessScope } from '../telemetry/instrumentation.js'
import type { Delivery, Headers } from '../transport/transport.js'
import type { ConsumerEngine } from './consumer-engine.js'
import type { HoldEnd } from './delivery-hook.js'
import type { Lane } from './lane.js'

/** One delivery from the moment its processing starts until its settlement is done. */
export interface DeliveryTask {
  readonly consumer: ConsumerEngine<unknown>
  readonly delivery: Delivery
  readonly lane: Lane
  /** Set when close gave up on the handler: whatever it returns later is discarded. */
  abandoned: boolean
}

/**
 * One delivery being handled, from its decoded envelope on: what every step of its handling
 * (handler, settle, retry, put back, set aside, forward) needs, passed along as one.
 */
export interface Handling {
  readonly task: DeliveryTask
  readonly envelope: Envelope
  readonly headers: Headers
  readonly scope: ProcessScope | undefined
}

/** How the handling of a delivery ended. */
export type Settled = ConsumeOutcome | 'released' | 'abandoned'

/**
 * What the handling of one delivery asks of its consumer's lifecycle: to wait outside the
 * handler slots, and to be told when the task is done.
 */
export interface TaskWaits {
  /**
   * Waits `ms` outside the handler slots. Resolves false when the wait was ended (by a drain
   * for `drainable` waits, by a close for every wait) or the delivery's channel is gone.
   */
  wait(task: DeliveryTask, ms: number, drainable: boolean): Promise<boolean>
  /** Holds the delivery in place until `until`: undefined to run again, else why it was cut. */
  hold(task: DeliveryTask, until: number | Promise<unknown>): Promise<HoldEnd | undefined>
  /** The task's settlement is done (it always ends here, once). */
  finished(task: DeliveryTask): void
}
