import { randomUUID } from 'node:crypto'
import { CompiledQuery, sql, type QueryExecutor, type RawBuilder } from 'kysely'
import {
  AceMqError,
  ConfigurationError,
  ErrorCodes,
  OutboxRecord,
  type Duration,
  type OutboxStore,
} from '@acemq/core'
import {
  assertClaimBatch,
  assertRenew,
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DEFAULT_OUTBOX_TABLE,
  functionOption as fn,
  integerAtLeast,
  outboxColumns,
  outboxFailOptions,
  outboxIds,
  outboxLease,
  outboxReason,
  outboxRecordsOldestFirst,
  OUTBOX_ROW_COLUMNS,
  outboxTableTrouble,
  parseTableName,
  retiredOutboxRecordFromRow,
  toMillis,
  type OutboxFailOptions,
  type OutboxFailure,
  type OutboxRow,
  type OutboxStats,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from '@acemq/core/spi'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { compile, run, type Compiled } from './internal/prepared.js'
import { queryExecutor } from './internal/executor.js'
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
  /** MySQL only: whether the server takes `SKIP LOCKED` (undefined until the first claim). */
  #skipLocked: boolean | undefined

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
    await this.#guard(() =>
      run(
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
      ),
    )
  }

  async claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]> {
    assertClaimBatch(batch, leaseMs)
    const owner = randomUUID()
    const values = { owner, lease: leaseMs, batch, now: this.#now?.() }
    return this.#guard(async () => {
      if (this.dialect === 'mysql') return outboxRecordsOldestFirst(await this.#claimMysql(values))
      return outboxRecordsOldestFirst(
        (await run<OutboxRow>(this.#executor, this.#sql.lease(values))).rows,
      )
    })
  }

  async renew(ids: string | readonly string[], lease: string, leaseMs: number): Promise<number> {
    const list = assertRenew(ids, lease, leaseMs)
    if (list.length === 0) return 0
    return this.#guard(async () => {
      const result =
        await sql`update ${this.#t} set leased_until = ${this.#clock()} + ${sql.lit(leaseMs)} where id in (${sql.join(list)}) and lease_owner = ${lease} and ${PENDING}`.execute(
          { getExecutor: () => this.#executor },
        )
      return Number(result.numAffectedRows ?? 0n)
    })
  }

  async markPublished(ids: string | readonly string[]): Promise<void> {
    const list = outboxIds(ids)
    if (list.length === 0) return
    await this.#guard(async () => {
      if (this.dialect === 'postgres') {
        // One statement compiled once, the ids as one array parameter.
        await run(this.#executor, this.#sql.publishAll({ ids: list, now: this.#now?.() }))
        return
      }
      await sql`update ${this.#t} set published_at = ${this.#clock()}, lease_owner = null, leased_until = null where id in (${sql.join(list)}) and published_at is null`.execute(
        { getExecutor: () => this.#executor },
      )
    })
  }

  async markFailed(
    id: string,
    reason: string,
    options?: number | OutboxFailOptions,
  ): Promise<OutboxFailure> {
    const [key] = outboxIds(id)
    const { maxAttempts, lease, retryInMs } = outboxFailOptions(options, this.maxAttempts)
    return this.#guard(async () => {
      const result = await run(
        this.#executor,
        this.#sql.fail({
          id: key,
          reason: outboxReason(reason),
          max: maxAttempts,
          now: this.#now?.(),
          lease: lease ?? null,
          retry: retryInMs,
        }),
      )
      const { rows } = await run<{ retired_at: unknown; published_at: unknown }>(
        this.#executor,
        this.#sql.state({ id: key }),
      )
      const row = rows[0]
      if (row === undefined) {
        throw new ConfigurationError(`markFailed(id): the outbox has no record '${String(key)}'`)
      }
      const retired = row.retired_at !== null && row.retired_at !== undefined
      if (Number(result.numAffectedRows ?? 0n) === 0) {
        // Nothing changed: another relay holds it, or it was published or retired meanwhile.
        return lease === undefined && retired ? 'retired' : 'lapsed'
      }
      return retired ? 'retired' : 'pending'
    })
  }

  async release(ids: string | readonly string[], lease?: string | undefined): Promise<void> {
    const list = outboxIds(ids)
    if (lease !== undefined) outboxLease(lease, 'release(lease)')
    if (list.length === 0) return
    const holder = lease === undefined ? sql`` : sql` and lease_owner = ${lease}`
    await this.#guard(() =>
      sql`update ${this.#t} set lease_owner = null, leased_until = null where id in (${sql.join(list)}) and ${PENDING}${holder}`.execute(
        { getExecutor: () => this.#executor },
      ),
    )
  }

  async reoffer(ids?: string | readonly string[]): Promise<number> {
    const list = ids === undefined ? undefined : outboxIds(ids)
    if (list?.length === 0) return 0
    const only = list === undefined ? sql`` : sql` and id in (${sql.join(list)})`
    return this.#guard(async () => {
      const result =
        await sql`update ${this.#t} set retired_at = null, attempts = 0, lease_owner = null, leased_until = null where ${RETIRED}${only}`.execute(
          { getExecutor: () => this.#executor },
        )
      return Number(result.numAffectedRows ?? 0n)
    })
  }

  async pendingCount(): Promise<number> {
    return (await this.stats()).pending
  }

  async retired(limit = 100): Promise<readonly RetiredOutboxRecord[]> {
    integerAtLeast(limit, 1, 'retired(limit)')
    const { rows } = await this.#guard(() =>
      run<OutboxRow>(this.#executor, this.#sql.retired({ limit })),
    )
    return rows.map((row) => retiredOutboxRecordFromRow(row))
  }

  /**
   * Resolves when the outbox table answers; rejects with `ACEMQ_STORE_TABLE_MISSING` (and the
   * way to create it) when it does not exist. Call it at start-up.
   *
   * @example
   * ```ts
   * await outbox.verify()
   * ```
   */
  async verify(): Promise<void> {
    await this.stats()
  }

  async stats(): Promise<OutboxStats> {
    const { rows } = await this.#guard(() =>
      run<Record<string, unknown>>(this.#executor, this.#sql.stats({ now: this.#now?.() })),
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
    const result = await this.#guard(() => query.execute({ getExecutor: () => this.#executor }))
    return Number(result.numAffectedRows ?? 0n)
  }

  /**
   * MySQL and MariaDB have no `UPDATE ... RETURNING`. Where the server has `SKIP LOCKED`
   * (MySQL 8, MariaDB 10.6) the claim is a read-committed transaction that locks its batch
   * with `SELECT ... FOR UPDATE SKIP LOCKED` — a second relay passes over those rows instead of
   * waiting for them, and no gap is locked against the application's inserts — then leases the
   * rows by id. Elsewhere, one `UPDATE ... ORDER BY ... LIMIT` leases under the claim's token.
   */
  async #claimMysql(values: {
    readonly owner: string
    readonly lease: number
    readonly batch: number
    readonly now: number | undefined
  }): Promise<OutboxRow[]> {
    if (this.#skipLocked !== false) {
      try {
        return await this.#executor.provideConnection(async (connection) => {
          // Read committed: the locking read takes no gap locks, so the application's inserts
          // never wait behind (or deadlock with) a claim.
          await connection.executeQuery(
            CompiledQuery.raw('set transaction isolation level read committed'),
          )
          await connection.executeQuery(CompiledQuery.raw('start transaction'))
          try {
            const { rows } = await connection.executeQuery<{ id: unknown }>(
              this.#sql.lockFree(values),
            )
            if (rows.length > 0) {
              await connection.executeQuery(
                sql`update ${this.#t} set lease_owner = ${values.owner}, leased_until = ${this.#clock()} + ${sql.lit(values.lease)} where id in (${sql.join(rows.map((row) => row.id))})`.compile(
                  { getExecutor: () => this.#executor },
                ),
              )
            }
            await connection.executeQuery(CompiledQuery.raw('commit'))
          } catch (error) {
            await connection.executeQuery(CompiledQuery.raw('rollback')).catch(() => undefined)
            throw error
          }
          this.#skipLocked = true
          return (
            await connection.executeQuery<OutboxRow>(this.#sql.leased({ owner: values.owner }))
          ).rows
        })
      } catch (error) {
        // A server without SKIP LOCKED refuses the syntax: claim the older way from now on.
        if (this.#skipLocked !== undefined || !isSyntaxError(error)) throw error
        this.#skipLocked = false
      }
    }
    await run(this.#executor, this.#sql.lease(values))
    return (await run<OutboxRow>(this.#executor, this.#sql.leased({ owner: values.owner }))).rows
  }

  async #guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work()
    } catch (error) {
      throw outboxTableTrouble(error, this.table)
    }
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
  /** MySQL only: locks the next batch of free rows, passing over rows another claim locked. */
  readonly lockFree: Compiled<'batch' | 'now'>
  readonly leased: Compiled<'owner'>
  /** Postgres only: marks a list of ids published. */
  readonly publishAll: Compiled<'ids' | 'now'>
  readonly fail: Compiled<'id' | 'reason' | 'max' | 'now' | 'lease' | 'retry'>
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
  const columns = sql.raw(OUTBOX_ROW_COLUMNS)
  const qualified = sql.raw(
    OUTBOX_ROW_COLUMNS.split(', ')
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
    lockFree: compile(
      executor,
      ['batch', 'now'],
      ($) =>
        sql`select id from ${t} where ${pending} and (leased_until is null or leased_until <= ${clock($.now)}) order by created_at, id limit ${$.batch} for update skip locked`,
    ),
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
    // The lease condition last: a holder whose lease lapsed (another claim took the row, or it
    // was marked) changes nothing. A back-off holds the row until leased_until, unleased.
    fail: compile(executor, ['id', 'reason', 'max', 'now', 'lease', 'retry'], ($) => {
      const lease = dialect === 'postgres' ? sql`cast(${$.lease} as text)` : $.lease
      const retry = bigint($.retry)
      return sql`update ${t} set retired_at = case when attempts + 1 >= ${dialect === 'postgres' ? sql`cast(${$.max} as integer)` : $.max} then ${clock($.now)} else null end, attempts = attempts + 1, last_error = ${$.reason}, lease_owner = null, leased_until = case when ${retry} > 0 then ${clock($.now)} + ${retry} else null end where id = ${$.id} and ${stillPending} and (${lease} is null or lease_owner = ${lease})`
    }),
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

const PENDING = sql`published_at is null and retired_at is null`
const RETIRED = sql`published_at is null and retired_at is not null`

/** MySQL / MariaDB's answer to syntax it does not know (`ER_PARSE_ERROR`). */
function isSyntaxError(error: unknown): boolean {
  const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown }
  return errno === 1064 || code === 'ER_PARSE_ERROR'
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
