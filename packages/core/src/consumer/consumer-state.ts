import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'

/**
 * Where a consumer is in its life. Every change goes through {@link moveState},
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
export type ConsumerState =
  'consuming' | 'detached' | 'resubscribing' | 'stopped' | 'closingWhenIdle' | 'closed'

/** The moves allowed out of each state (see {@link ConsumerState}). */
export const TRANSITIONS: Readonly<Record<ConsumerState, readonly ConsumerState[]>> = {
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
export function intakeOpen(state: ConsumerState): boolean {
  return state === 'consuming' || state === 'detached' || state === 'resubscribing'
}

/** The state after `from` → `next`; a move {@link TRANSITIONS} does not allow is a defect. */
export function moveState(queue: string, from: ConsumerState, next: ConsumerState): ConsumerState {
  if (!TRANSITIONS[from].includes(next)) {
    throw new AceMqError(`the consumer on '${queue}' cannot go from '${from}' to '${next}'`, {
      code: ErrorCodes.INVALID_STATE,
    })
  }
  return next
}
