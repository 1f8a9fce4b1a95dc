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

async function acquire(): Promise<void> {
  for (;;) {
    try {
      fs.mkdirSync(LOCK)
      return
    } catch {
      try {
        if (Date.now() - fs.statSync(LOCK).mtimeMs > STALE_LOCK_MS)
          fs.rmSync(LOCK, { recursive: true, force: true })
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
