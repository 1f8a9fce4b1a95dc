import { execFileSync } from 'node:child_process'
import os from 'node:os'
import pg from 'pg'
import { DATABASE_URL } from './config.js'

/** Where the numbers came from. */
export interface Machine {
  readonly cpus: number
  readonly cpuModel: string
  readonly memoryGb: number
  readonly os: string
  readonly node: string
  readonly rabbitmq: string
  readonly postgres: string
  readonly commit: string
  /** Files under packages/ that differed from the commit when the run started (others work in the same tree). */
  readonly uncommitted: readonly string[]
  /** 1-minute load average when the run started and ended: other work on the machine. */
  readonly loadStart: number
  loadEnd: number
}

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

function uncommitted(): string[] {
  try {
    return execFileSync('git', ['status', '--porcelain', '--', '../packages'], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.slice(3).trim())
      .filter((line) => line !== '')
  } catch {
    return []
  }
}

async function postgresVersion(): Promise<string> {
  const client = new pg.Client(DATABASE_URL)
  try {
    await client.connect()
    const { rows } = await client.query<{ server_version: string }>('show server_version')
    return rows[0]?.server_version ?? 'unknown'
  } catch (error) {
    return `unreachable (${error instanceof Error ? error.message : String(error)})`
  } finally {
    await client.end().catch(() => undefined)
  }
}

export async function describeMachine(rabbitmq: string): Promise<Machine> {
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    rabbitmq,
    postgres: await postgresVersion(),
    commit: commit(),
    uncommitted: uncommitted(),
    loadStart: os.loadavg()[0] ?? 0,
    loadEnd: 0,
  }
}
