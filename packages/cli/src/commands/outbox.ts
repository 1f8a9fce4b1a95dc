import { Option, type Command } from 'commander'
import { AceMqError, ErrorCodes } from '@acemq/core'
import {
  DEFAULT_OUTBOX_TABLE,
  describeError,
  isMissingTableError,
  outboxReofferStatement,
  outboxRetiredStatement,
  retiredOutboxRecordFromRow,
  type OutboxRow,
  type OutboxStatement,
  type RetiredOutboxRecord,
  type SqlDialect,
} from '@acemq/core/spi'
import { EXIT_CODES, UsageError } from '../exit-codes.js'
import { createOutput, type Output } from '../output.js'
import type { CommandContext } from '../program.js'

/** What a statement returned: rows (a select) and how many rows it changed (an update). */
interface Answer {
  readonly rows: readonly Record<string, unknown>[]
  readonly changed: number
}

/** A database reached through the driver its URL names. */
interface Database {
  readonly dialect: SqlDialect
  run(statement: OutboxStatement): Promise<Answer>
  close(): Promise<void>
}

/**
 * The drivers are optional peer dependencies: imported by a name held in a variable, so neither
 * the compiler nor a bundler insists on one the operator does not use.
 */
async function load(driver: string, dialect: string): Promise<unknown> {
  try {
    return await import(driver)
  } catch (error) {
    throw new AceMqError(
      `the ${dialect} driver '${driver}' is not installed: npm install ${driver} (an optional peer dependency of @acemq/cli) — ${describeError(error)}`,
    )
  }
}

/** The dialect a `--database-url` names: postgres://, mysql:// (or mariadb://), else a SQLite file. */
export function dialectOf(url: string): { dialect: SqlDialect; target: string } {
  if (/^postgres(ql)?:\/\//i.test(url)) return { dialect: 'postgres', target: url }
  if (/^(mysql|mariadb):\/\//i.test(url)) {
    return { dialect: 'mysql', target: url.replace(/^mariadb:/i, 'mysql:') }
  }
  if (/^sqlite:/i.test(url))
    return { dialect: 'sqlite', target: url.replace(/^sqlite:(\/\/)?/i, '') }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    throw new UsageError(
      `--database-url must be postgres://…, mysql://… or a SQLite file (path or sqlite://path); got a ${url.slice(0, url.indexOf(':'))}:// URL`,
    )
  }
  return { dialect: 'sqlite', target: url }
}

async function openDatabase(url: string): Promise<Database> {
  const { dialect, target } = dialectOf(url)
  switch (dialect) {
    case 'postgres': {
      const pg = (await load('pg', 'Postgres')) as {
        default: { Client: new (options: { connectionString: string }) => PgClient }
      }
      const client = new pg.default.Client({ connectionString: target })
      await client.connect()
      return {
        dialect,
        async run(statement) {
          const result = await client.query(statement.sql, [...statement.parameters])
          return { rows: result.rows, changed: result.rowCount ?? 0 }
        },
        close: () => client.end(),
      }
    }
    case 'mysql': {
      const mysql = (await load('mysql2/promise', 'MySQL / MariaDB')) as {
        default: { createConnection(uri: string): Promise<MysqlConnection> }
      }
      const connection = await mysql.default.createConnection(target)
      return {
        dialect,
        async run(statement) {
          const [result] = await connection.query(statement.sql, [...statement.parameters])
          return Array.isArray(result)
            ? { rows: result as Record<string, unknown>[], changed: 0 }
            : { rows: [], changed: (result as { affectedRows?: number }).affectedRows ?? 0 }
        },
        close: () => connection.end(),
      }
    }
    case 'sqlite': {
      const sqlite = (await load('better-sqlite3', 'SQLite')) as {
        default: new (path: string, options: { fileMustExist: boolean }) => SqliteDatabase
      }
      const db = new sqlite.default(target, { fileMustExist: true })
      return {
        dialect,
        async run(statement) {
          const prepared = db.prepare(statement.sql)
          if (prepared.reader) return { rows: prepared.all(...statement.parameters), changed: 0 }
          return { rows: [], changed: prepared.run(...statement.parameters).changes }
        },
        close: async () => {
          db.close()
        },
      }
    }
  }
}

interface PgClient {
  connect(): Promise<void>
  query(
    sql: string,
    parameters: unknown[],
  ): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>
  end(): Promise<void>
}

interface MysqlConnection {
  query(sql: string, parameters: unknown[]): Promise<[unknown, unknown]>
  end(): Promise<void>
}

interface SqliteDatabase {
  prepare(sql: string): {
    readonly reader: boolean
    all(...parameters: readonly unknown[]): Record<string, unknown>[]
    run(...parameters: readonly unknown[]): { changes: number }
  }
  close(): void
}

/**
 * Runs `work` on the database and closes the connection; a missing table is said in words, and
 * no error carries the database password.
 */
async function withDatabase<T>(
  url: string,
  table: string,
  work: (db: Database) => Promise<T>,
): Promise<T> {
  const redact = createOutput({ json: false, url }).redact
  let db: Database | undefined
  try {
    db = await openDatabase(url)
    return await work(db)
  } catch (error) {
    if (error instanceof UsageError) throw error
    if (isMissingTableError(error)) {
      throw new AceMqError(
        `the outbox table ${table} does not exist in that database (or --table is not the one your service uses): create it with the DDL of \`acemq outbox sql\``,
        { code: ErrorCodes.STORE_TABLE_MISSING },
      )
    }
    const code = (error as { code?: unknown }).code
    throw new AceMqError(redact(describeError(error)), {
      code:
        typeof code === 'string' && code.startsWith('ACEMQ_')
          ? (code as typeof ErrorCodes.ERROR)
          : ErrorCodes.ERROR,
    })
  } finally {
    await db?.close().catch(() => undefined)
  }
}

interface DatabaseOptions {
  readonly databaseUrl: string
  readonly table: string
}

/** The options and output every outbox database command shares. */
function databaseCommand(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--database-url <url>',
        'the database: postgres://…, mysql://… or a SQLite file (path or sqlite://path); the password is never printed',
      )
        .env('DATABASE_URL')
        .makeOptionMandatory(),
    )
    .option('--table <name>', 'the outbox table, optionally schema.table', DEFAULT_OUTBOX_TABLE)
}

function outputFor(command: Command, options: DatabaseOptions, context: CommandContext): Output {
  const { output } = context(command)
  return createOutput({ json: output.json, url: options.databaseUrl })
}

/**
 * `outbox retired` and `outbox reoffer`: the records the relay gave up on, and the way back.
 * They reach the table through the driver the `--database-url` names (pg, mysql2,
 * better-sqlite3), with the statements `@acemq/core` writes for every SQL outbox store.
 */
export function outboxCommands(program: Command, context: CommandContext): void {
  const outbox =
    program.commands.find((command) => command.name() === 'outbox') ??
    program.command('outbox').description('the transactional outbox')
  databaseCommand(
    outbox
      .command('retired')
      .description(
        'list the records retired after their failed publishes (newest first), with why',
      ),
  )
    .option('-n, --limit <n>', 'at most this many', parseLimit, 100)
    .action(async (options: DatabaseOptions & { limit: number }, command: Command) => {
      const output = outputFor(command, options, context)
      const records = await withDatabase(options.databaseUrl, options.table, async (db) => {
        const { rows } = await db.run(
          outboxRetiredStatement(options.table, db.dialect, options.limit),
        )
        return rows.map((row) => retiredOutboxRecordFromRow(row as unknown as OutboxRow))
      })
      output.result(describeRetired(records, options.table), {
        table: options.table,
        retired: records.map((record) => ({
          id: record.id,
          exchange: record.exchange,
          routingKey: record.routingKey,
          attempts: record.attempts,
          lastError: record.lastError ?? null,
          createdAt: new Date(record.createdAt).toISOString(),
          retiredAt: new Date(record.retiredAt).toISOString(),
        })),
      })
    })
  databaseCommand(
    outbox
      .command('reoffer')
      .description(
        'offer retired records to the relay again (attempts counted from 0): the ids named, or --all',
      )
      .argument('[ids...]', 'the records to re-offer'),
  )
    .option('--all', 'every retired record', false)
    .action(
      async (ids: string[], options: DatabaseOptions & { all: boolean }, command: Command) => {
        if (options.all === ids.length > 0) {
          throw new UsageError('name the records to re-offer, or give --all (not both)')
        }
        const output = outputFor(command, options, context)
        const changed = await withDatabase(options.databaseUrl, options.table, async (db) => {
          const statement = outboxReofferStatement(
            options.table,
            db.dialect,
            options.all ? undefined : ids,
          )
          return (await db.run(statement)).changed
        })
        const missed = options.all ? 0 : ids.length - changed
        output.result(
          `re-offered ${changed} record(s) from ${options.table}${missed > 0 ? `; ${missed} of the ${ids.length} named were not retired (or do not exist)` : ''}`,
          { table: options.table, reoffered: changed, notRetired: missed },
        )
        // Nothing that was named could be re-offered: say so in the exit code too.
        if (!options.all && changed === 0) process.exitCode = EXIT_CODES.failed
      },
    )
}

function parseLimit(value: string): number {
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`--limit must be a whole number of at least 1; got ${value}`)
  }
  return n
}

function describeRetired(records: readonly RetiredOutboxRecord[], table: string): string {
  if (records.length === 0) return `no retired records in ${table}`
  const lines = records.map(
    (record) =>
      `${record.id}  ${record.attempts} attempts  retired ${new Date(record.retiredAt).toISOString()}  → ${record.exchange === '' ? '(default exchange)' : record.exchange} / ${record.routingKey}\n    ${record.lastError ?? '(no reason kept)'}`,
  )
  return [`${records.length} retired record(s) in ${table}:`, ...lines].join('\n')
}
