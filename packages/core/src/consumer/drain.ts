import { HANDLER_ABANDON_TIMEOUT } from '../constants.js'
import { AceMqError } from '../errors.js'
import { sleep } from '../internal/timers.js'
import type { ConsumerHost } from './consumer-host.js'

/** What a drain does to the consumers it waits for once their time is over. */
export interface Drainable {
  /** Aborts the handlers' signals. */
  abortHandlers(): void
  /** Gives up on the handlers still running: their late outcomes are discarded. */
  abandonRunning(): void
}

/**
 * The drain of a close, a consumer's or the connection's: waits up to `drainTimeoutMs` for
 * `idle()`, then aborts the handlers' signals and waits {@link HANDLER_ABANDON_TIMEOUT} more,
 * then gives up on the handlers still running (their late outcomes are discarded).
 */
export async function drainOrAbandon(
  consumers: readonly Drainable[],
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

/** Reports `given` handlers of the consumer on `queue` given up on by a close, if any. */
export function reportAbandoned(host: ConsumerHost, queue: string, given: number): void {
  if (given === 0) return
  const one = given === 1
  host.reportError(
    new AceMqError(
      `gave up on ${given} handler${one ? '' : 's'} that did not return within the drain and the ${HANDLER_ABANDON_TIMEOUT / 1_000} s grace after ${one ? 'its' : 'their'} signal was aborted`,
    ),
    `closing the consumer on '${queue}': ${one ? 'its message goes' : 'their messages go'} back to the queue and ${one ? 'runs' : 'run'} again`,
  )
}
