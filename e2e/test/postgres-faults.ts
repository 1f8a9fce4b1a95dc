import { execFile } from 'node:child_process'
import fs from 'node:fs'
import { promisify } from 'node:util'

const run = promisify(execFile)
const CLUSTERS = '/etc/postgresql'

/** The local Postgres cluster (`15 main`), or undefined when this machine has none. */
function cluster(): [string, string] | undefined {
  if (!fs.existsSync(CLUSTERS)) return undefined
  const version = fs.readdirSync(CLUSTERS).sort().at(-1)
  return version === undefined ? undefined : [version, 'main']
}

/** Whether this machine runs the Postgres cluster the tests use, so a test can restart it. */
export function hasLocalPostgres(): boolean {
  return cluster() !== undefined
}

async function pgctl(action: 'stop' | 'start' | 'status'): Promise<void> {
  const target = cluster()
  if (target === undefined) throw new Error(`no Postgres cluster under ${CLUSTERS}`)
  await run('pg_ctlcluster', ['--skip-systemctl-redirect', ...target, action], {
    timeout: 60_000,
  })
}

/**
 * Stops Postgres (`pg_ctlcluster ... stop`, fast shutdown: every connection is cut, and new
 * ones are refused until it starts again). Hold the broker-fault lock around it, and call
 * {@link ensurePostgresRunning} in a `finally`.
 */
export async function stopPostgres(): Promise<void> {
  await pgctl('stop')
}

/** Starts Postgres unless it is running: for `finally` blocks and `afterAll`. */
export async function ensurePostgresRunning(): Promise<void> {
  if (cluster() === undefined) return
  try {
    await pgctl('status')
  } catch {
    await pgctl('start')
  }
}
