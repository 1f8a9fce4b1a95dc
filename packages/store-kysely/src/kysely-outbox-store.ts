import { randomUUID } from 'node:crypto'
import { sql, type QueryExecutor, type RawBuilder } from 'kysely'
import {
  AceMqError,
  ConfigurationError,
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DEFAULT_OUTBOX_TABLE,
  ErrorCodes,
  OutboxRecord,
  toMillis,
  type Duration,
  type OutboxFailure,
  type OutboxStats,
  type OutboxStore,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from '@acemq/core'
import {
  assertClaimBatch,
  outboxColumns,
  outboxIds,
  outboxMaxAttempts,
  outboxReason,
  outboxRecordFromRow,
  retiredOutboxRecordFromRow,
  type OutboxRow,
} from '@acemq/core/spi'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { compile, run, type Compiled } from './internal/prepared.js'
import { queryExecutor } from './internal/executor.js'
import { functionOption as fn, integerAtLeast, parseTableName } from '@acemq/core/spi'
import type { KyselyDatabase } from './kysely-database.js'
import { createOutboxTableSql } from './outbox-table-sql.js'

/**
 * Options of {@link KyselyOutboxStore}.
 *
 * @example
 * ```ts
 * const options: KyselyOutboxStoreOptions = { table: 'app.outbox', maxAttempts: 5 }
 * ```
 */
export interface KyselyOutboxStoreOptions {
  /** The table, created beforehand from `createOutboxTableSql` or `outboxMigration` (default `acemq_outbox`); may be `schema.table`. */
  readonly table?: string
  /** Failed publishes before a record is retired (default 10). */
  readonly maxAttempts?: number
  /** The SQL to write (default: told from the Kysely adapter). */
  readonly dialect?: IdempotencyDialect
  /**
   * The clock, epoch milliseconds. Default: the database server's on Postgres and MySQL, so
   * relays on hosts whose clocks disagree still agree on every lease; `Date.now` on SQLite.
   * Given, every timestamp is this clock's: for tests that move time without sleeping.
   */
  readonly now?: () => number
}

const COLUMNS =
  'id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts, last_error'

/**
 * The transactional outbox on any Kysely database (Postgres through `pg` is the tested
 * default; SQLite and MySQL / MariaDB are tested too). `add(trx, record)` writes the record in
 * your transaction, so it exists exactly when your business rows do; the relay
 * (`mq.outbox(store)`) leases batches with a conditional update — `FOR UPDATE SKIP LOCKED` on
 * Postgres, SQLite's write lock, row locks on MySQL — so two relays never publish one record
 * at once. The store never runs DDL: create the table with {@link createOutboxTableSql} or
 * {@link outboxMigration}.
 *
 * @example
 * ```ts
 * const outbox = new KyselyOutboxStore(db)
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto('orders').values(order).execute()
 *   await outbox.add(trx, OutboxRecord.of('orders', 'order.placed', order))
 * })
 * mq.outbox(outbox).start()
 * ```
 */
export class KyselyOutboxStore implements OutboxStore {
  /** The table this store uses. */
  readonly table: string
  /** The SQL this store writes. */
  readonly dialect: IdempotencyDialect
  /** Failed publishes before a record is retired. */
  readonly maxAttempts: number
  readonly #executor: QueryExecutor
  readonly #now: (() => number) | undefined
  readonly #sql: Statements
  readonly #t: RawBuilder<unknown>

  /**
   * Creates the store on a Kysely instance (any `Kysely<DB>`); a bad option throws a
   * `ConfigurationError` naming it.
   *
   * @example
   * ```ts
   * const outbox = new KyselyOutboxStore(db, { table: 'acemq_outbox', maxAttempts: 10 })
   * ```
   */
  constructor(db: KyselyDatabase, options: KyselyOutboxStoreOptions = {}) {
    if (typeof db !== 'object' || db === null || typeof db.getExecutor !== 'function') {
      throw new ConfigurationError(`db must be a Kysely instance; got ${String(db)}`)
    }
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    this.table = options.table ?? DEFAULT_OUTBOX_TABLE
    parseTableName(this.table)
    this.maxAttempts = integerAtLeast(
      options.maxAttempts ?? DEFAULT_OUTBOX_MAX_ATTEMPTS,
      1,
      'maxAttempts',
    )
    this.dialect = options.dialect === undefined ? detectDialect(db) : checkDialect(options.dialect)
    this.#now =
      options.now !== undefined
        ? fn(options.now, 'now')
        : this.dialect === 'sqlite'
          ? Date.now
          : undefined
    // The caller's plugins must not rewrite the store's SQL (CamelCasePlugin would rename the
    // columns it reads back).
    this.#executor = queryExecutor(db).withoutPlugins()
    this.#t = sql.table(this.table)
    this.#sql = statements(this.#executor, this.table, this.dialect, this.#now === undefined)
  }

  /**
   * The DDL of this store's table in its dialect, for your migrations.
   *
   * @example
   * ```ts
   * await sql.raw(outbox.createTableSql()).execute(db)
   * ```
   */
  createTableSql(): string {
    return createOutboxTableSql({ table: this.table, dialect: this.dialect })
  }

  /**
   * Writes `record` in `trx` — your Kysely transaction — so it commits or rolls back with
   * your business rows. (Given the Kysely instance itself, it writes at once, outside any
   * transaction.) A record whose id the outbox already has fails the statement.
   *
   * @example
   * ```ts
   * await db.transaction().execute(async (trx) => {
   *   await trx.insertInto('orders').values(order).execute()
   *   await outbox.add(trx, OutboxRecord.of('orders', 'order.placed', order, { id: order.id }))
   * })
   * ```
   */
  async add(trx: KyselyDatabase, record: OutboxRecord): Promise<void> {
    if (typeof trx !== 'object' || trx === null || typeof trx.getExecutor !== 'function') {
      throw new ConfigurationError(`add(trx) must be a Kysely transaction; got ${String(trx)}`)
    }
    if (!(record instanceof OutboxRecord)) {
      throw new ConfigurationError('add(record) needs an OutboxRecord, from OutboxRecord.of()')
    }
    const { headers, envelope } = outboxColumns(record)
    await run(
      queryExecutor(trx),
      this.#sql.insert({
        id: record.id,
        exchange: record.exchange,
        routingKey: record.routingKey,
        contentType: record.contentType,
        body: Buffer.from(record.body.buffer, record.body.byteOffset, record.body.byteLength),
        headers,
        envelope,
        now: this.#now?.(),
      }),
    )
  }

  async claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]> {
    assertClaimBatch(batch, leaseMs)
    const owner = randomUUID()
    const values = { owner, lease: leaseMs, batch, now: this.#now?.() }
    let rows: OutboxRow[]
    if (this.dialect === 'mysql') {
      // No UPDATE ... RETURNING: lease with a token of this claim's own, then read by it.
      await run(this.#executor, this.#sql.lease(values))
      rows = (await run<OutboxRow>(this.#executor, this.#sql.leased({ owner }))).rows
    } else {
      rows = (await run<OutboxRow>(this.#executor, this.#sql.lease(values))).rows
    }
    return sortRecords(rows)
  }

  async markPublished(ids: string | readonly string[]): Promise<void> {
    const list = outboxIds(ids)
    if (list.length === 0) return
    if (this.dialect === 'postgres') {
      // One statement compiled once, the ids as one array parameter.
      await run(this.#executor, this.#sql.publishAll({ ids: list, now: this.#now?.() }))
      return
    }
    await sql`update ${this.#t} set published_at = ${this.#clock()}, lease_owner = null, leased_until = null where id in (${sql.join(list)}) and published_at is null`.execute(
      { getExecutor: () => this.#executor },
    )
  }

  async markFailed(id: string, reason: string, maxAttempts?: number): Promise<OutboxFailure> {
    const [key] = outboxIds(id)
    const limit = outboxMaxAttempts(maxAttempts, this.maxAttempts)
    await run(
      this.#executor,
      this.#sql.fail({ id: key, reason: outboxReason(reason), max: limit, now: this.#now?.() }),
    )
    const { rows } = await run<{ retired_at: unknown; published_at: unknown }>(
      this.#executor,
      this.#sql.state({ id: key }),
    )
    const row = rows[0]
    if (row === undefined) {
      throw new ConfigurationError(`markFailed(id): the outbox has no record '${String(key)}'`)
    }
    return row.retired_at === null || row.retired_at === undefined ? 'pending' : 'retired'
  }

  async release(ids: string | readonly string[]): Promise<void> {
    const list = outboxIds(ids)
    if (list.length === 0) return
    await sql`update ${this.#t} set lease_owner = null, leased_until = null where id in (${sql.join(list)}) and published_at is null`.execute(
      { getExecutor: () => this.#executor },
    )
  }

  async pendingCount(): Promise<number> {
    return (await this.stats()).pending
  }

  async retired(limit = 100): Promise<readonly RetiredOutboxRecord[]> {
    integerAtLeast(limit, 1, 'retired(limit)')
    const { rows } = await run<OutboxRow>(this.#executor, this.#sql.retired({ limit }))
    return rows.map((row) => retiredOutboxRecordFromRow(row))
  }

  async stats(): Promise<OutboxStats> {
    const { rows } = await run<Record<string, unknown>>(
      this.#executor,
      this.#sql.stats({ now: this.#now?.() }),
    )
    const row = rows[0] ?? {}
    const oldest = row['oldest']
    return {
      pending: toNumber(row['pending'] ?? 0),
      retired: toNumber(row['retired'] ?? 0),
      oldestPendingAt: oldest === null || oldest === undefined ? undefined : toNumber(oldest),
      now: toNumber(row['now_ms']),
    }
  }

  /**
   * Deletes at most `limit` records published longer than `olderThan` ago and returns how many;
   * call it on a schedule (published records are kept until then, for the record).
   *
   * @example
   * ```ts
   * while ((await outbox.purgePublished('7d')) > 0) {}
   * ```
   */
  async purgePublished(olderThan: Duration, limit = 1_000): Promise<number> {
    const ms = toMillis(olderThan, 'purgePublished(olderThan)')
    integerAtLeast(limit, 1, 'purgePublished(limit)')
    const before = sql`${this.#clock()} - ${sql.lit(ms)}`
    const query =
      this.dialect === 'mysql'
        ? sql`delete from ${this.#t} where published_at is not null and published_at <= ${before} limit ${sql.lit(limit)}`
        : sql`delete from ${this.#t} where id in (select id from ${this.#t} where published_at is not null and published_at <= ${before} limit ${sql.lit(limit)})`
    const result = await query.execute({ getExecutor: () => this.#executor })
    return Number(result.numAffectedRows ?? 0n)
  }

  #clock(): RawBuilder<unknown> {
    const now = this.#now?.()
    return clockOf(this.dialect, now === undefined, now)
  }
}

interface Statements {
  readonly insert: Compiled<
    'id' | 'exchange' | 'routingKey' | 'contentType' | 'body' | 'headers' | 'envelope' | 'now'
  >
  readonly lease: Compiled<'owner' | 'lease' | 'batch' | 'now'>
  readonly leased: Compiled<'owner'>
  /** Postgres only: marks a list of ids published. */
  readonly publishAll: Compiled<'ids' | 'now'>
  readonly fail: Compiled<'id' | 'reason' | 'max' | 'now'>
  readonly state: Compiled<'id'>
  readonly retired: Compiled<'limit'>
  readonly stats: Compiled<'now'>
}

/** The database server's clock in epoch milliseconds (see the idempotency store). */
const DATABASE_CLOCK: Readonly<Record<'postgres' | 'mysql', string>> = {
  postgres: 'floor(extract(epoch from statement_timestamp()) * 1000)::bigint',
  mysql: "(timestampdiff(microsecond, '1970-01-01', utc_timestamp(3)) div 1000)",
}

function clockOf(
  dialect: IdempotencyDialect,
  databaseClock: boolean,
  now: unknown,
): RawBuilder<unknown> {
  if (dialect !== 'sqlite' && databaseClock) return sql.raw(DATABASE_CLOCK[dialect])
  return dialect === 'postgres' ? sql`cast(${now} as bigint)` : sql`${now}`
}

function statements(
  executor: QueryExecutor,
  table: string,
  dialect: IdempotencyDialect,
  databaseClock: boolean,
): Statements {
  const t = sql.table(table)
  const clock = (now: unknown): RawBuilder<unknown> => clockOf(dialect, databaseClock, now)
  const columns = sql.raw(COLUMNS)
  const qualified = sql.raw(
    COLUMNS.split(', ')
      .map((column) => `o.${column}`)
      .join(', '),
  )
  const pending = sql`published_at is null and retired_at is null`
  const retiredOnly = sql`published_at is null and retired_at is not null`
  // Pending, written so that it does not name the pending index's condition: a statement about
  // one id goes through the primary key, not a scan of the pending index.
  const stillPending = sql`coalesce(published_at, retired_at) is null`
  const bigint = (value: unknown): RawBuilder<unknown> =>
    dialect === 'postgres' ? sql`cast(${value} as bigint)` : sql`${value}`
  const lease = (): Compiled<'owner' | 'lease' | 'batch' | 'now'> =>
    compile(executor, ['owner', 'lease', 'batch', 'now'], ($) => {
      const free = sql`${pending} and (leased_until is null or leased_until <= ${clock($.now)})`
      const set = sql`set lease_owner = ${$.owner}, leased_until = ${clock($.now)} + ${bigint($.lease)}`
      switch (dialect) {
        case 'postgres':
          // SKIP LOCKED: a second relay passes over the rows the first is leasing, and the
          // lock re-checks the condition on a row that changed meanwhile; the rows stay locked
          // until the update, so it finds them by id alone (a condition on the pending columns
          // there led Postgres to scan the pending index for every claimed row).
          return sql`with next as materialized (select id from ${t} where ${free} order by created_at, id limit ${$.batch} for update skip locked) update ${t} as o ${set} from next where o.id = next.id returning ${qualified}`
        case 'sqlite':
          // One writer at a time: the statement is atomic under SQLite's write lock.
          return sql`update ${t} ${set} where id in (select id from ${t} where ${free} order by created_at, id limit ${$.batch}) returning ${columns}`
        case 'mysql':
          return sql`update ${t} ${set} where ${free} order by created_at, id limit ${$.batch}`
      }
    })
  return {
    insert: compile(
      executor,
      ['id', 'exchange', 'routingKey', 'contentType', 'body', 'headers', 'envelope', 'now'],
      ($) =>
        sql`insert into ${t} (id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts) values (${$.id}, ${$.exchange}, ${$.routingKey}, ${$.contentType}, ${$.body}, ${$.headers}, ${$.envelope}, ${clock($.now)}, 0)`,
    ),
    lease: lease(),
    publishAll: compile(
      executor,
      ['ids', 'now'],
      ($) =>
        sql`update ${t} set published_at = ${clock($.now)}, lease_owner = null, leased_until = null where id = any(${$.ids}) and published_at is null`,
    ),
    leased: compile(
      executor,
      ['owner'],
      ($) =>
        sql`select ${columns} from ${t} where lease_owner = ${$.owner} and ${pending} order by created_at, id`,
    ),
    // retired_at first: MySQL evaluates SET left to right with the values it has just set.
    fail: compile(
      executor,
      ['id', 'reason', 'max', 'now'],
      ($) =>
        sql`update ${t} set retired_at = case when attempts + 1 >= ${dialect === 'postgres' ? sql`cast(${$.max} as integer)` : $.max} then ${clock($.now)} else null end, attempts = attempts + 1, last_error = ${$.reason}, lease_owner = null, leased_until = null where id = ${$.id} and ${stillPending}`,
    ),
    state: compile(
      executor,
      ['id'],
      ($) => sql`select retired_at, published_at from ${t} where id = ${$.id}`,
    ),
    retired: compile(
      executor,
      ['limit'],
      ($) =>
        sql`select ${columns}, retired_at from ${t} where ${retiredOnly} order by retired_at desc, id limit ${$.limit}`,
    ),
    stats: compile(
      executor,
      ['now'],
      ($) =>
        // Three subqueries, each answered by its own index (pending, retired), never a scan of
        // the published records the table keeps until they are purged.
        sql`select (select count(*) from ${t} where ${pending}) as pending, (select count(*) from ${t} where ${retiredOnly}) as retired, (select min(created_at) from ${t} where ${pending}) as oldest, ${clock($.now)} as now_ms`,
    ),
  }
}

/** Oldest first: RETURNING gives no order. */
function sortRecords(rows: readonly OutboxRow[]): StoredOutboxRecord[] {
  return rows
    .map((row) => outboxRecordFromRow(row))
    .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

function toNumber(value: unknown): number {
  const n = typeof value === 'number' ? value : Number(value)
  if (!Number.isFinite(n)) {
    throw new AceMqError(`the outbox table returned ${String(value)}, not a number`, {
      code: ErrorCodes.STORE_RESULT_UNKNOWN,
    })
  }
  return n
}
