import { withBrokerFault } from '../../test-support/broker-faults.js'

/** How long a test may wait for the broker-fault lock while other suites hold it. */
export const LOCK_WAIT_TIMEOUT = 300_000

/**
 * Runs `fn` holding the shared broker-fault lock, as the packages' broker suites do, so a
 * memory alarm or a forced close raised by a disruptive test running at the same time
 * (another package, another engineer on the same broker) cannot land in the middle of an
 * example. Hold it only around the example's run: other suites wait for it.
 */
export function withoutBrokerFaults<T>(fn: () => Promise<T>): Promise<T> {
  return withBrokerFault(fn)
}
