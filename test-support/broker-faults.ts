import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** The broker's usual memory watermark, restored after every alarm. */
export const NORMAL_WATERMARK = '0.4'

const LOCK = path.join(os.tmpdir(), 'acemq-broker-fault.lock')
const STALE_LOCK_MS = 5 * 60_000

/** Runs `rabbitmqctl` with `args`; returns its standard output. */
export async function rabbitmqctl(...args: string[]): Promise<string> {
  const { stdout } = await run('rabbitmqctl', args, { timeout: 60_000 })
  return stdout
}

/** The process holding the lock, if it wrote its pid and is still alive. */
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
    // No pid written (yet, or by an older holder): fall back to the lock's age.
    return Date.now() - fs.statSync(LOCK).mtimeMs > STALE_LOCK_MS
  }
}

async function acquire(): Promise<void> {
  for (;;) {
    try {
      fs.mkdirSync(LOCK)
      fs.writeFileSync(path.join(LOCK, 'pid'), String(process.pid))
      return
    } catch {
      try {
        // A holder that died (a killed test run) leaves its lock behind: take it over.
        if (holderIsGone()) fs.rmSync(LOCK, { recursive: true, force: true })
      } catch {
        // Someone else removed it first.
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}

/**
 * Runs `fn` while no other test process is injecting a broker fault, so two fault tests
 * never see each other's alarm or closed connections. Fault tests live in
 * `*.disruptive.test.ts` files, which run one at a time after the rest of the suite.
 */
export async function withBrokerFault<T>(fn: () => Promise<T>): Promise<T> {
  await acquire()
  try {
    return await fn()
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true })
  }
}

/** Sets off RabbitMQ's memory alarm: every publishing connection is blocked. */
export async function raiseMemoryAlarm(): Promise<void> {
  await rabbitmqctl('set_vm_memory_high_watermark', '0.0001')
}

/** Clears the memory alarm (always call it in a `finally`). */
export async function clearMemoryAlarm(): Promise<void> {
  await rabbitmqctl('set_vm_memory_high_watermark', NORMAL_WATERMARK)
}

/** Drops every client connection, as a broker restart or a network cut would. */
export async function closeAllConnections(reason = 'acemq fault test'): Promise<void> {
  await rabbitmqctl('close_all_connections', reason)
}

/** How long a suite waits for the broker-fault lock that another run holds. */
export const LOCK_WAIT_TIMEOUT = 300_000

/** The broker-fault lock, held until {@link HeldLock.release}. */
export interface HeldLock {
  /** How long it took to get the lock. */
  readonly waitedMs: number
  release(): Promise<void>
}

/**
 * Takes the broker-fault lock and holds it until released: for a suite that publishes and
 * counts for its whole run (a memory alarm raised elsewhere would turn its publishes into
 * refusals), or a fault run that injects many faults and wants no other fault in between.
 * Throws when the lock is not free within `timeoutMs`.
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
