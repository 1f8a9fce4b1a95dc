import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { TransportSubscription } from '../transport/transport.js'
import type { ConsumerHost } from './consumer-host.js'
import { waitFor } from './drain.js'

/** How long cancelling a subscription may take before closing goes on without it. */
const CANCEL_TIMEOUT_MS = 5_000

/**
 * One subscription of a consumer and the deliveries it carries. A consumer has a new one after
 * a long pause (see `ConsumerOptions.heldTimeoutMs`); an old one is closed once the
 * deliveries it carried are settled.
 */
export interface Lane {
  subscription: TransportSubscription | undefined
  /** Tasks (running or waiting) on this lane's deliveries. */
  tasks: number
  /** Its channel was lost and the transport has not reported it consuming again. */
  lost: boolean
  /** Cancelled for good: it carries no new deliveries and is closed once idle. */
  retired: boolean
}

/** Stops new deliveries on `lane`, bounded: a hung broker must not hold a close open. */
export async function cancelLane(lane: Lane, host: ConsumerHost, queue: string): Promise<void> {
  const subscription = lane.subscription
  if (subscription === undefined) return
  const cancelled = await waitFor(
    subscription.cancel().catch(() => undefined),
    CANCEL_TIMEOUT_MS,
  )
  if (!cancelled) {
    host.reportError(
      new AceMqError(`cancelling the subscription to '${queue}' took over 5 s`, {
        code: ErrorCodes.CANCEL_TIMEOUT,
      }),
      `closing the channel of '${queue}' instead`,
    )
  }
}
