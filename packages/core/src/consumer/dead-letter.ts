import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'

/** How a message came to be set aside: the settlement that moved it. */
export type DeadLetterOutcome = 'dead_lettered' | 'rejected' | 'parked' | 'refused' | 'invalid'

/**
 * One message that landed in a dead-letter (`{queue}.dlq`) or parking (`{queue}.parked`) queue:
 * someone must look at it (docs/design.md §13, "Loud dead letters").
 */
export interface DeadLetterReport {
  /** The queue it was consumed from. */
  readonly queue: string
  /** Where it is now: `{queue}.dlq` or `{queue}.parked`. */
  readonly target: string
  readonly messageId: string
  /**
   * `dead_lettered`: retries ran out (or an ordered partition gave up); `rejected`: `FatalError`
   * or `Ack.deadLetter`; `parked`: `Ack.park` or a message that could only loop; `refused`: an
   * interceptor refused it.
   */
  readonly outcome: DeadLetterOutcome
  /** Why: what `x-acemq-error` on the copy says. */
  readonly reason: string
  readonly attempt: number
}

/**
 * Told of every message a consumer moves to `.dlq` or `.parked`. The default reports each
 * through the connection's `onError` as an `ACEMQ_DEAD_LETTERED` error: printed as an
 * `AceMqWarning` when no `onError` is given, one line per reason at most once a minute with the
 * count of the others held back, so a flood prints a few lines, not one per message.
 *
 * @example
 * ```ts
 * const mq = await connect(url, {
 *   onDeadLetter: (r) => log.error({ queue: r.queue, id: r.messageId, reason: r.reason }, 'dead letter'),
 * })
 * ```
 */
export type OnDeadLetter = (report: DeadLetterReport) => void

/** What the default {@link OnDeadLetter} hands to `onError`: the reason, the message in the context. */
export function deadLetterWarning(report: DeadLetterReport): {
  readonly error: AceMqError
  readonly context: string
} {
  return {
    error: new AceMqError(report.reason, { code: ErrorCodes.DEAD_LETTERED }),
    context: `message ${report.messageId} from '${report.queue}' was moved to '${report.target}' (${report.outcome})`,
  }
}
