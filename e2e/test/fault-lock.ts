import { withBrokerFault } from '../../test-support/broker-faults.js'

/** How long a fault run waits for the broker-fault lock that other runs (benchmarks) hold. */
export const LOCK_WAIT_TIMEOUT = 300_000

/** The broker-fault lock, held by a run until it calls {@link HeldLock.release}. */
export interface HeldLock {
  /** How long it took to get the lock. */
  readonly waitedMs: number
  release(): Promise<void>
}

/**
 * Takes the shared broker-fault lock (`withBrokerFault`) and holds it until released, so that
 * a whole fault run — many faults, each a few seconds apart — holds it once instead of queueing
 * for it before every fault behind benchmarks that take it again and again, and no other
 * test's fault lands in the middle of the run. Throws when the lock is not free within
 * `timeoutMs`; a lock that arrives after that is given back at once.
 */
export async function holdBrokerFaultLock(timeoutMs = LOCK_WAIT_TIMEOUT): Promise<HeldLock> {
  const asked = Date.now()
  let acquired!: () => void
  let release!: () => void
  const isAcquired = new Promise<boolean>((resolve) => (acquired = () => resolve(true)))
  const released = new Promise<void>((resolve) => (release = resolve))
  const held = withBrokerFault(async () => {
    acquired()
    await released
  })
  let timer: ReturnType<typeof setTimeout> | undefined
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs)
  })
  const won = await Promise.race([isAcquired, timedOut])
  clearTimeout(timer)
  if (!won) {
    release()
    throw new Error(
      `the broker-fault lock was not free within ${timeoutMs} ms: another test run or benchmark holds it`,
    )
  }
  return {
    waitedMs: Date.now() - asked,
    async release() {
      release()
      await held
    },
  }
}
