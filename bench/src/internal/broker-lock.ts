import { holdBrokerFaultLock } from '../../../test-support/broker-faults.js'
import { QUICK } from './config.js'

// A memory alarm or close_all_connections from a test suite in the middle of a round would
// measure the fault, not the code: each round holds the lock the suites take while they inject
// broker faults (test-support/broker-faults.ts), for well under the 5 minutes after which it
// counts as stale. A smoke test (BENCH_QUICK) must stay short: it waits 10 s, and after that
// once, not at all.
const GIVE_UP_MS = QUICK ? 10_000 : 3 * 60_000

let held = false
let gaveUp = false

/**
 * Runs `fn` while no test injects a broker fault. After waiting 3 minutes it runs anyway and
 * says so, so a forgotten lock cannot hang the benchmark.
 */
export async function withBrokerLock<T>(
  fn: () => Promise<T>,
  log: (line: string) => void,
): Promise<T> {
  if (held || (QUICK && gaveUp)) return fn()
  let lock: Awaited<ReturnType<typeof holdBrokerFaultLock>>
  try {
    lock = await holdBrokerFaultLock(GIVE_UP_MS)
  } catch {
    log(`  ! the broker-fault lock is still held after ${GIVE_UP_MS / 1000} s; running without it`)
    gaveUp = true
    return fn()
  }
  if (lock.waitedMs > 1_000) {
    log(`  … waited ${Math.round(lock.waitedMs / 1000)} s for the broker-fault lock`)
  }
  held = true
  try {
    return await fn()
  } finally {
    held = false
    await lock.release()
  }
}
