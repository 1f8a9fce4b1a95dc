import { sql, type QueryExecutor, type QueryResult, type RawBuilder } from 'kysely'
import { AceMqError, ErrorCodes } from '@acemq/core'
import { columnNumber } from '@acemq/core/spi'
import type { IdempotencyDialect } from './idempotency-dialect.js'
import { prepare, type Prepared } from './internal/prepared.js'

// The SQL of the Kysely idempotency store, and how its answers are read: every statement is
// compiled once per store (docs/design.md §7).

export interface Statements {
  readonly insert: Prepared<'id' | 'owner' | 'now'>
  /** Postgres only: {@link Statements.insert} for many ids at once, answering those inserted. */
  readonly insertMany: Prepared<'ids' | 'owners' | 'now'> | undefined
  /** Postgres only: {@link Statements.confirm} for many ids at once (each id once). */
  readonly confirmMany: Prepared<'ids' | 'owners' | 'now'> | undefined
  readonly read: Prepared<'id' | 'now', Record<string, unknown>>
  readonly takeOver: Prepared<'id' | 'owner' | 'now' | 'staleOwner'>
  readonly reclaim: Prepared<'id' | 'owner' | 'now'>
  readonly confirm: Prepared<'id' | 'owner' | 'now'>
  readonly release: Prepared<'id' | 'owner'>
  readonly purge: Prepared<'now'>
}

/**
 * The database server's clock in epoch milliseconds, one instant per statement:
 * `statement_timestamp()` is the statement's start even inside a transaction, and
 * `UTC_TIMESTAMP()` ignores the session time zone (converting `NOW()` would be ambiguous in
 * the hour a daylight-saving change repeats).
 */
const DATABASE_CLOCK: Readonly<Record<'postgres' | 'mysql', string>> = {
  postgres: 'floor(extract(epoch from statement_timestamp()) * 1000)::bigint',
  mysql: "(timestampdiff(microsecond, '1970-01-01', utc_timestamp(3)) div 1000)",
}

/** Every statement the store runs, compiled once for its table, dialect and durations. */
export function statements(
  executor: QueryExecutor,
  table: string,
  dialect: IdempotencyDialect,
  options: {
    readonly purgeBatchSize: number
    readonly retention: number
    readonly claimTimeout: number
    /** Whether the database's clock decides; else the `now` slot carries the store's. */
    readonly databaseClock: boolean
  },
): Statements {
  const t = sql.table(table)
  const yes = sql.raw(dialect === 'sqlite' ? '1' : 'true')
  const no = sql.raw(dialect === 'sqlite' ? '0' : 'false')
  const columns = sql`(id, owner, claimed_at, confirmed, confirmed_at)`
  const mysql = dialect === 'mysql'
  const retention = sql.lit(options.retention)
  const staleAfter = sql.lit(Math.max(options.retention, options.claimTimeout))
  const claimTimeout = sql.lit(options.claimTimeout)
  // Every timestamp a statement writes or compares comes from here.
  const clock = (now: unknown): RawBuilder<unknown> =>
    dialect !== 'sqlite' && options.databaseClock
      ? sql.raw(DATABASE_CLOCK[dialect])
      : dialect === 'postgres'
        ? // Typed, or Postgres reads `$1 - 60000` as integer arithmetic and the value overflows.
          sql`cast(${now} as bigint)`
        : sql`${now}`
  return {
    insert: prepare(executor, ['id', 'owner', 'now'], ($) => {
      const insert = sql`insert into ${t} ${columns} values (${$.id}, ${$.owner}, ${clock($.now)}, ${no}, null)`
      return mysql ? insert : sql`${insert} on conflict (id) do nothing`
    }),
    insertMany:
      dialect === 'postgres'
        ? prepare(
            executor,
            ['ids', 'owners', 'now'],
            ($) =>
              sql`insert into ${t} ${columns} select c.id, c.owner, ${clock($.now)}, ${no}, null from unnest(cast(${$.ids} as text[]), cast(${$.owners} as text[])) as c(id, owner) on conflict (id) do nothing returning id`,
          )
        : undefined,
    confirmMany:
      dialect === 'postgres'
        ? prepare(
            executor,
            ['ids', 'owners', 'now'],
            ($) =>
              sql`insert into ${t} ${columns} select c.id, c.owner, ${clock($.now)}, ${yes}, ${clock($.now)} from unnest(cast(${$.ids} as text[]), cast(${$.owners} as text[])) as c(id, owner) on conflict (id) do update set confirmed = ${yes}, confirmed_at = ${clock($.now)}`,
          )
        : undefined,
    read: prepare(
      executor,
      ['id', 'now'],
      ($) =>
        sql`select owner, claimed_at, confirmed, confirmed_at, ${clock($.now)} as now_ms from ${t} where id = ${$.id}`,
    ),
    // Only the racer whose update still finds the claim stale (and its owner unchanged) wins.
    takeOver: prepare(
      executor,
      ['id', 'owner', 'now', 'staleOwner'],
      ($) =>
        sql`update ${t} set owner = ${$.owner}, claimed_at = ${clock($.now)} where id = ${$.id} and owner = ${$.staleOwner} and confirmed = ${no} and claimed_at < ${clock($.now)} - ${claimTimeout}`,
    ),
    // A confirmation past the retention counts as absent: the id is claimed again.
    reclaim: prepare(
      executor,
      ['id', 'owner', 'now'],
      ($) =>
        sql`update ${t} set owner = ${$.owner}, claimed_at = ${clock($.now)}, confirmed = ${no}, confirmed_at = null where id = ${$.id} and confirmed = ${yes} and coalesce(confirmed_at, claimed_at) < ${clock($.now)} - ${retention}`,
    ),
    confirm: prepare(executor, ['id', 'owner', 'now'], ($) => {
      const values = sql`values (${$.id}, ${$.owner}, ${clock($.now)}, ${yes}, ${clock($.now)})`
      return mysql
        ? sql`insert into ${t} ${columns} ${values} on duplicate key update confirmed = ${yes}, confirmed_at = ${clock($.now)}`
        : sql`insert into ${t} ${columns} ${values} on conflict (id) do update set confirmed = ${yes}, confirmed_at = ${clock($.now)}`
    }),
    release: prepare(
      executor,
      ['id', 'owner'],
      ($) => sql`delete from ${t} where id = ${$.id} and owner = ${$.owner} and confirmed = ${no}`,
    ),
    purge: prepare(executor, ['now'], ($) => {
      const before = sql`${clock($.now)} - ${retention}`
      const staleBefore = sql`${clock($.now)} - ${staleAfter}`
      // claimed_at bounds both branches, so the claimed_at index finds the candidates.
      const expired = sql`claimed_at < ${before} and ((confirmed = ${yes} and coalesce(confirmed_at, claimed_at) < ${before}) or (confirmed = ${no} and claimed_at < ${staleBefore}))`
      const limit = sql.lit(options.purgeBatchSize)
      return mysql
        ? sql`delete from ${t} where ${expired} limit ${limit}`
        : // The outer condition is checked again on rows a concurrent claim just changed.
          sql`delete from ${t} where id in (select id from ${t} where ${expired} limit ${limit}) and ${expired}`
    }),
  }
}

/** The affected-row count, or an error when the driver did not report one: unknown is never "taken". */
export function affected(result: QueryResult<unknown>, what: string): number {
  if (typeof result.numAffectedRows !== 'bigint') {
    throw new AceMqError(
      `the database did not report how many rows the idempotency ${what} affected; refusing to guess`,
      { code: ErrorCodes.STORE_RESULT_UNKNOWN },
    )
  }
  return Number(result.numAffectedRows)
}

export function isDuplicateKey(error: unknown): boolean {
  const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown }
  return errno === 1062 || code === 'ER_DUP_ENTRY'
}

export function toNumber(value: unknown, column: string): number {
  return columnNumber(value, 'the idempotency table', column)
}

export function toBoolean(value: unknown): boolean {
  if (value === true || value === 1 || value === 1n || value === '1' || value === 't') return true
  if (value === false || value === 0 || value === 0n || value === '0' || value === 'f') return false
  throw new AceMqError(
    `the idempotency table returned ${String(value)} for confirmed, not a boolean`,
    {
      code: ErrorCodes.STORE_RESULT_UNKNOWN,
    },
  )
}
