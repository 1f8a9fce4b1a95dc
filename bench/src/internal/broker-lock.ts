import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { QUICK } from './config.js'

// The lock the test suites take while they inject broker faults (test-support/broker-faults.ts,
// same protocol: a directory, with the holder's pid inside):
// a memory alarm or close_all_connections in the middle of a round would measure the fault,
// not the code. Each round holds it for well under the 5 minutes after which it counts as stale.
const LOCK = path.join(os.tmpdir(), 'acemq-broker-fault.lock')
const STALE_LOCK_MS = 5 * 60_000
// A smoke test (BENCH_QUICK) must stay short: it waits 10 s, and after that once, not at all.
const GIVE_UP_MS = QUICK ? 10_000 : 3 * 60_000

/** Whether the lock's holder has died (or, without a pid file, the lock is older than 5 min). */
function holderIsGone(): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(LOCK, 'pid'), 'utf8'))
    if (!Number.isInteger(pid) || pid <= 0) return false
    try {
      process.kill(pid, 0)
      return false
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ESRCH'
    }
  } catch {
    return Date.now() - fs.statSync(LOCK).mtimeMs > STALE_LOCK_MS
  }
}

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
  const started = Date.now()
  let said = false
  let acquired = false
  while (!acquired) {
    try {
      fs.mkdirSync(LOCK)
      fs.writeFileSync(path.join(LOCK, 'pid'), String(process.pid))
      acquired = true
    } catch {
      try {
        if (holderIsGone()) fs.rmSync(LOCK, { recursive: true, force: true })
      } catch {
        // Someone else removed it first.
      }
      if (Date.now() - started > GIVE_UP_MS) {
        log(
          `  ! the broker-fault lock is still held after ${GIVE_UP_MS / 1000} s; running without it`,
        )
        gaveUp = true
        break
      }
      if (!said) {
        log('  … waiting for the broker-fault lock (a test is injecting a broker fault)')
        said = true
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
  held = acquired
  try {
    return await fn()
  } finally {
    if (acquired) {
      held = false
      fs.rmSync(LOCK, { recursive: true, force: true })
    }
  }
}
