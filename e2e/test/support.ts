import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AMQP_URL, DATABASE_URL, uniqueName } from '../../test-support/services.js'

const here = path.dirname(fileURLToPath(import.meta.url))
const e2eRoot = path.resolve(here, '..')

/** A child process running one of the e2e programs, with its output collected by line. */
export interface Child {
  readonly process: ChildProcess
  readonly lines: string[]
  /** Resolves with the first line matching `pattern`, or rejects after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>
  /** Resolves with the exit code (or the signal's name). */
  readonly exited: Promise<number | string>
}

/** Starts `src/<program>.ts` with tsx, from the packages' sources, with `env` added. */
export function startProgram(program: string, env: Record<string, string>): Child {
  const child = spawn(
    process.execPath,
    ['--conditions=@acemq/source', '--import', 'tsx', path.join(e2eRoot, 'src', `${program}.ts`)],
    {
      cwd: e2eRoot,
      env: { ...process.env, AMQP_URL, DATABASE_URL, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const lines: string[] = []
  const waiters = new Set<() => void>()
  const onData = (chunk: Buffer): void => {
    lines.push(
      ...chunk
        .toString()
        .split('\n')
        .filter((l) => l.length > 0),
    )
    for (const waiter of [...waiters]) waiter()
  }
  child.stdout?.on('data', onData)
  child.stderr?.on('data', onData)
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? -1))
  })
  return {
    process: child,
    lines,
    exited,
    waitFor(pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const line = lines.find((l) => pattern.test(l))
          if (line !== undefined) {
            waiters.delete(check)
            clearTimeout(timer)
            resolve(line)
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(
            new Error(
              `no line matching ${pattern} within ${timeoutMs} ms; output:\n${lines.join('\n')}`,
            ),
          )
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
  }
}

/** A Postgres database with a fresh idempotency table and side-effect table for one test. */
export interface EffectsDatabase {
  readonly db: Kysely<Record<string, never>>
  readonly idempotencyTable: string
  readonly effectsTable: string
  /** message id → how many times its side effect happened, and by which workers. */
  effects(): Promise<Map<string, string[]>>
  drop(): Promise<void>
}

export async function effectsDatabase(
  createTableSql: (table: string) => string,
): Promise<EffectsDatabase> {
  const db = new Kysely<Record<string, never>>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max: 2 }) }),
  })
  const idempotencyTable = uniqueName('e2e_idem').replace('.', '_')
  const effectsTable = uniqueName('e2e_effects').replace('.', '_')
  await sql.raw(createTableSql(idempotencyTable)).execute(db)
  await sql`create table ${sql.table(effectsTable)} (seq bigserial primary key, message_id text not null, worker text not null)`.execute(
    db,
  )
  return {
    db,
    idempotencyTable,
    effectsTable,
    async effects() {
      const result = await sql<{
        message_id: string
        worker: string
      }>`select message_id, worker from ${sql.table(effectsTable)} order by seq`.execute(db)
      const map = new Map<string, string[]>()
      for (const row of result.rows)
        map.set(row.message_id, [...(map.get(row.message_id) ?? []), row.worker])
      return map
    },
    async drop() {
      await sql`drop table if exists ${sql.table(effectsTable)}`.execute(db)
      await sql`drop table if exists ${sql.table(idempotencyTable)}`.execute(db)
      await db.destroy()
    },
  }
}
