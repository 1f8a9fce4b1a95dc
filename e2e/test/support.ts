import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AMQP_URL, DATABASE_URL, uniqueName } from '@acemq/testing'

const here = path.dirname(fileURLToPath(import.meta.url))
const e2eRoot = path.resolve(here, '..')

/** A child process running one of the e2e programs, with its output collected by line. */
export interface Child {
  readonly process: ChildProcess
  readonly lines: string[]
  /**
   * Resolves with the first line matching `pattern` (from line index `from` on, default 0), or
   * rejects after `timeoutMs`.
   */
  waitFor(pattern: RegExp, timeoutMs?: number, from?: number): Promise<string>
  /** Writes one line to the program's standard input (for programs that take commands). */
  send(line: string): void
  /** Resolves with the exit code (or the signal's name). */
  readonly exited: Promise<number | string>
}

/** Options for {@link startProgram}. */
export interface ProgramOptions {
  /** Extra options for node itself, such as `--expose-gc`. */
  readonly nodeArgs?: readonly string[]
}

/** Starts `src/<program>.ts` with tsx, from the packages' sources, with `env` added. */
export function startProgram(
  program: string,
  env: Record<string, string>,
  options: ProgramOptions = {},
): Child {
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      '--conditions=@acemq/source',
      '--import',
      'tsx',
      path.join(e2eRoot, 'src', `${program}.ts`),
    ],
    {
      cwd: e2eRoot,
      env: { ...process.env, AMQP_URL, DATABASE_URL, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  )
  // A program that has exited (or never reads) must not fail the test with EPIPE.
  child.stdin?.on('error', () => undefined)
  const lines: string[] = []
  const waiters = new Set<() => void>()
  // Chunks do not end on line boundaries: keep each stream's unfinished last line until the
  // rest of it (or the end of the stream) arrives.
  const read = (stream: NodeJS.ReadableStream | null): void => {
    let tail = ''
    const take = (text: string, last: boolean): void => {
      const parts = (tail + text).split('\n')
      tail = last ? '' : (parts.pop() ?? '')
      lines.push(...parts.filter((l) => l.length > 0))
      for (const waiter of [...waiters]) waiter()
    }
    stream?.on('data', (chunk: Buffer) => take(chunk.toString(), false))
    stream?.on('end', () => take('', true))
  }
  read(child.stdout)
  read(child.stderr)
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? -1))
  })
  return {
    process: child,
    lines,
    exited,
    send(line) {
      child.stdin?.write(`${line}\n`)
    },
    waitFor(pattern, timeoutMs = 20_000, from = 0) {
      return new Promise((resolve, reject) => {
        // Each line is looked at once, however long the program talks.
        let next = from
        const check = (): void => {
          for (; next < lines.length; next++) {
            const line = lines[next] as string
            if (pattern.test(line)) {
              waiters.delete(check)
              clearTimeout(timer)
              resolve(line)
              return
            }
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(
            new Error(
              `no line matching ${pattern} within ${timeoutMs} ms; last output:\n${lines.slice(-200).join('\n')}`,
            ),
          )
        }, timeoutMs)
        waiters.add(check)
        check()
      })
    },
  }
}

/**
 * Starts an `idempotent-worker` on `queue` at `url`, writing to `database`'s tables; `env`
 * overrides the rest (HANDLER_MS, PREFETCH, CONCURRENCY…).
 */
export function startIdempotentWorker(
  url: string,
  queue: string,
  database: Pick<EffectsDatabase, 'idempotencyTable' | 'effectsTable'>,
  name: string,
  env: Record<string, string> = {},
): Child {
  return startProgram('idempotent-worker', {
    AMQP_URL: url,
    QUEUE: queue,
    IDEMPOTENCY_TABLE: database.idempotencyTable,
    EFFECTS_TABLE: database.effectsTable,
    WORKER_NAME: name,
    CLAIM_TIMEOUT_MS: '3000',
    IN_PROGRESS_DELAY_MS: '200',
    RECOVERY_MAX_DELAY_MS: '1000',
    ...env,
  })
}

/**
 * Keeps a pg pool's lost connections from crashing the process when Postgres restarts. pg
 * emits `error` on a client whose server went away — on the pool for an idle client, on the
 * client itself for one checked out (Kysely holds one for every query) — and an `error`
 * event nobody listens to is thrown out of the process. The query in flight still fails, and
 * the pool drops the dead client.
 */
export function survivePostgresRestarts(pool: pg.Pool): void {
  pool.on('error', () => undefined)
  pool.on('connect', (client) => client.on('error', () => undefined))
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
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 })
  survivePostgresRestarts(pool)
  const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
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
