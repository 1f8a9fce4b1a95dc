import { randomUUID } from 'node:crypto'
import Sqlite from 'better-sqlite3'
import { ConfigurationError, OutboxRecord, type Duration, type OutboxStore } from '@acemq/core'
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
  retiredOutboxRecordFromRow,
  toMillis,
  type OutboxFailOptions,
  type OutboxFailure,
  type OutboxRow,
  type OutboxStats,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from '@acemq/core/spi'
import { isDatabase, openDatabase } from './internal/database.js'
import { sqliteOutboxTable, type SqliteOutboxTable } from './internal/outbox-table-sql.js'

/**
 * Options of {@link SqliteOutboxStore}.
 *
 * @example
 * ```ts
 * const options: SqliteOutboxStoreOptions = { table: 'outbox', maxAttempts: 5 }
 * ```
 */
export interface SqliteOutboxStoreOptions {
  /** The table, created beforehand from {@link SqliteOutboxStore.createTableSql} (default `acemq_outbox`). */
  readonly table?: string
  /** Failed publishes before a record is retired (default 10). */
  readonly maxAttempts?: number
  /** How long a write waits for another connection's lock (default 5 s) on a file the store opens. */
  readonly busyTimeout?: Duration
  /** The clock, epoch milliseconds (default `Date.now`); tests move it instead of sleeping. */
  readonly now?: () => number
}

interface Statements {
  readonly lease: Sqlite.Statement<[string, number, number, number], OutboxRow>
  readonly renew: Sqlite.Statement<[number, string, string]>
  readonly publish: Sqlite.Statement<[number, string]>
  readonly fail: Sqlite.Statement<
    [number, number, number, number, string, string, string | null, string | null]
  >
  readonly state: Sqlite.Statement<[string], { retired_at: number | null }>
  readonly release: Sqlite.Statement<[string]>
  readonly releaseHeld: Sqlite.Statement<[string, string]>
  readonly reoffer: Sqlite.Statement<[string]>
  readonly reofferAll: Sqlite.Statement<[]>
  readonly retired: Sqlite.Statement<[number], OutboxRow>
  readonly stats: Sqlite.Statement<
    [],
    { pending: number; retired: number; oldest: number | bigint | null }
  >
  readonly purge: Sqlite.Statement<[number, number]>
}

type InsertStatement = Sqlite.Statement<
  [string, string, string, string, Buffer, string, string, number]
>

/**
 * The transactional outbox in a SQLite file through `better-sqlite3`, safe across processes
 * sharing the file. `add(db, record)` is synchronous, so it runs inside your
 * `db.transaction(...)` function and commits or rolls back with your rows. A claim is one
 * `UPDATE ... RETURNING` under SQLite's write lock, so two relays never lease one record.
 * Given a path, the store opens the file (WAL, busy timeout) and closes it on `close()`;
 * given a `Database`, its life is yours. The store never runs DDL.
 *
 * @example
 * ```ts
 * const db = new Database('app.db')
 * const outbox = new SqliteOutboxStore(db)
 * db.transaction(() => {
 *   db.prepare('insert into orders (id) values (?)').run(order.id)
 *   outbox.add(db, OutboxRecord.of('', 'orders.placed', order))
 * })()
 * mq.outbox(outbox).start()
 * ```
 */
export class SqliteOutboxStore implements OutboxStore, AsyncDisposable {
  /** The table this store uses. */
  readonly table: string
  /** Failed publishes before a record is retired. */
  readonly maxAttempts: number
  readonly #db: Sqlite.Database
  readonly #ownsDb: boolean
  readonly #table: SqliteOutboxTable
  readonly #now: () => number
  readonly #inserts = new WeakMap<Sqlite.Database, InsertStatement>()
  #statements: Statements | undefined

  constructor(databaseOrPath: Sqlite.Database | string, options: SqliteOutboxStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    this.table = options.table ?? DEFAULT_OUTBOX_TABLE
    this.#table = sqliteOutboxTable(this.table)
    this.maxAttempts = integerAtLeast(
      options.maxAttempts ?? DEFAULT_OUTBOX_MAX_ATTEMPTS,
      1,
      'maxAttempts',
    )
    this.#now = fn(options.now ?? Date.now, 'now')
    const busyTimeout =
      options.busyTimeout === undefined ? undefined : toMillis(options.busyTimeout, 'busyTimeout')
    const { db, owned } = openDatabase(databaseOrPath, busyTimeout)
    this.#db = db
    this.#ownsDb = owned
  }

  /**
   * The DDL of the outbox table (default name `acemq_outbox`), for your migrations: run it
   * with `db.exec(sql)`. It is the SQLite DDL `@acemq/store-kysely` writes, so its
   * `outboxMigration({ dialect: 'sqlite' })` creates the same table.
   *
   * @example
   * ```ts
   * db.exec(SqliteOutboxStore.createTableSql())
   * ```
   */
  static createTableSql(options: { readonly table?: string } = {}): string {
    return sqliteOutboxTable(options.table ?? DEFAULT_OUTBOX_TABLE).ddl
  }

  /** The DDL of this store's table. */
  createTableSql(): string {
    return this.#table.ddl
  }

  /**
   * Writes `record` on `db` at once and synchronously — call it inside your
   * `db.transaction(...)` function, on that transaction's database, so the record commits or
   * rolls back with your rows. A record whose id the outbox already has throws (and so rolls
   * the transaction back).
   *
   * @example
   * ```ts
   * db.transaction(() => { insertOrder.run(order); outbox.add(db, OutboxRecord.of('', 'orders.placed', order)) })()
   * ```
   */
  add(db: Sqlite.Database, record: OutboxRecord): void {
    if (!isDatabase(db)) {
      throw new ConfigurationError(
        `add(db) must be the better-sqlite3 Database your transaction runs on; got ${String(db)}`,
      )
    }
    if (!(record instanceof OutboxRecord)) {
      throw new ConfigurationError('add(record) needs an OutboxRecord, from OutboxRecord.of()')
    }
    let insert = this.#inserts.get(db)
    if (insert === undefined) {
      try {
        insert = db.prepare(
          `insert into ${this.#table.quoted} (id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts) values (?, ?, ?, ?, ?, ?, ?, ?, 0)`,
        ) as InsertStatement
      } catch (error) {
        throw outboxTableTrouble(error, this.table)
      }
      this.#inserts.set(db, insert)
    }
    const { headers, envelope } = outboxColumns(record)
    insert.run(
      record.id,
      record.exchange,
      record.routingKey,
      record.contentType,
      Buffer.from(record.body.buffer, record.body.byteOffset, record.body.byteLength),
      headers,
      envelope,
      this.#now(),
    )
  }

  async claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]> {
    assertClaimBatch(batch, leaseMs)
    const now = this.#now()
    return outboxRecordsOldestFirst(
      this.#prepared().lease.all(randomUUID(), now + leaseMs, now, batch),
    )
  }

  async renew(ids: string | readonly string[], lease: string, leaseMs: number): Promise<number> {
    const list = assertRenew(ids, lease, leaseMs)
    const statements = this.#prepared()
    const until = this.#now() + leaseMs
    return this.#db.transaction(() => {
      let renewed = 0
      for (const id of list) renewed += statements.renew.run(until, id, lease).changes
      return renewed
    })()
  }

  async markPublished(ids: string | readonly string[]): Promise<void> {
    const list = outboxIds(ids)
    const statements = this.#prepared()
    const now = this.#now()
    this.#db.transaction(() => {
      for (const id of list) statements.publish.run(now, id)
    })()
  }

  async markFailed(
    id: string,
    reason: string,
    options?: number | OutboxFailOptions,
  ): Promise<OutboxFailure> {
    const [key] = outboxIds(id) as [string]
    const { maxAttempts, lease, retryInMs } = outboxFailOptions(options, this.maxAttempts)
    const statements = this.#prepared()
    const now = this.#now()
    const held = lease ?? null
    const changes = statements.fail.run(
      maxAttempts,
      now,
      retryInMs,
      now + retryInMs,
      outboxReason(reason),
      key,
      held,
      held,
    ).changes
    const row = statements.state.get(key)
    if (row === undefined) {
      throw new ConfigurationError(`markFailed(id): the outbox has no record '${key}'`)
    }
    const retired = row.retired_at !== null
    // Nothing changed: another relay holds it, or it was published or retired meanwhile.
    if (changes === 0) return lease === undefined && retired ? 'retired' : 'lapsed'
    return retired ? 'retired' : 'pending'
  }

  async release(ids: string | readonly string[], lease?: string | undefined): Promise<void> {
    const list = outboxIds(ids)
    if (lease !== undefined) outboxLease(lease, 'release(lease)')
    const statements = this.#prepared()
    this.#db.transaction(() => {
      for (const id of list) {
        if (lease === undefined) statements.release.run(id)
        else statements.releaseHeld.run(id, lease)
      }
    })()
  }

  async reoffer(ids?: string | readonly string[]): Promise<number> {
    const list = ids === undefined ? undefined : outboxIds(ids)
    const statements = this.#prepared()
    if (list === undefined) return statements.reofferAll.run().changes
    return this.#db.transaction(() => {
      let reoffered = 0
      for (const id of list) reoffered += statements.reoffer.run(id).changes
      return reoffered
    })()
  }

  async pendingCount(): Promise<number> {
    return (await this.stats()).pending
  }

  async retired(limit = 100): Promise<readonly RetiredOutboxRecord[]> {
    integerAtLeast(limit, 1, 'retired(limit)')
    return this.#prepared()
      .retired.all(limit)
      .map((row) => retiredOutboxRecordFromRow(row))
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
    const now = this.#now()
    const row = this.#prepared().stats.get()
    const oldest = row?.oldest
    return {
      pending: Number(row?.pending ?? 0),
      retired: Number(row?.retired ?? 0),
      oldestPendingAt: oldest === null || oldest === undefined ? undefined : Number(oldest),
      now,
    }
  }

  /**
   * Deletes at most `limit` records published longer than `olderThan` ago; returns how many.
   *
   * @example
   * ```ts
   * while ((await outbox.purgePublished('7d')) > 0) {}
   * ```
   */
  async purgePublished(olderThan: Duration, limit = 1_000): Promise<number> {
    const ms = toMillis(olderThan, 'purgePublished(olderThan)')
    integerAtLeast(limit, 1, 'purgePublished(limit)')
    return this.#prepared().purge.run(this.#now() - ms, limit).changes
  }

  /** Closes the file if the store opened it; a `Database` you passed stays open. */
  async close(): Promise<void> {
    if (this.#ownsDb && this.#db.open) this.#db.close()
  }

  /** Same as {@link SqliteOutboxStore.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** Prepares every statement once, on first use (the table may be created after the store). */
  #prepared(): Statements {
    if (this.#statements !== undefined) return this.#statements
    try {
      this.#statements = this.#prepare()
    } catch (error) {
      throw outboxTableTrouble(error, this.table)
    }
    return this.#statements
  }

  #prepare(): Statements {
    const t = this.#table.quoted
    const pending = 'published_at is null and retired_at is null'
    const retired = 'published_at is null and retired_at is not null'
    return {
      lease: this.#db.prepare(
        `update ${t} set lease_owner = ?, leased_until = ? where id in (select id from ${t} where ${pending} and (leased_until is null or leased_until <= ?) order by created_at, id limit ?) returning ${OUTBOX_ROW_COLUMNS}`,
      ),
      renew: this.#db.prepare(
        `update ${t} set leased_until = ? where id = ? and lease_owner = ? and ${pending}`,
      ),
      publish: this.#db.prepare(
        `update ${t} set published_at = ?, lease_owner = null, leased_until = null where id = ? and published_at is null`,
      ),
      // retired_at first, as the Kysely store writes it (the SET sees the old attempts here);
      // a holder whose lease lapsed changes nothing; a back-off holds the row, unleased.
      fail: this.#db.prepare(
        `update ${t} set retired_at = case when attempts + 1 >= ? then ? else null end, leased_until = case when ? > 0 then ? else null end, attempts = attempts + 1, last_error = ?, lease_owner = null where id = ? and ${pending} and (? is null or lease_owner = ?)`,
      ),
      state: this.#db.prepare(`select retired_at from ${t} where id = ?`),
      release: this.#db.prepare(
        `update ${t} set lease_owner = null, leased_until = null where id = ? and ${pending}`,
      ),
      releaseHeld: this.#db.prepare(
        `update ${t} set lease_owner = null, leased_until = null where id = ? and ${pending} and lease_owner = ?`,
      ),
      reoffer: this.#db.prepare(
        `update ${t} set retired_at = null, attempts = 0, lease_owner = null, leased_until = null where id = ? and ${retired}`,
      ),
      reofferAll: this.#db.prepare(
        `update ${t} set retired_at = null, attempts = 0, lease_owner = null, leased_until = null where ${retired}`,
      ),
      retired: this.#db.prepare(
        `select ${OUTBOX_ROW_COLUMNS}, retired_at from ${t} where ${retired} order by retired_at desc, id limit ?`,
      ),
      stats: this.#db.prepare(
        // Each subquery answered by its own index (pending, retired), never a table scan.
        `select (select count(*) from ${t} where ${pending}) as pending, (select count(*) from ${t} where ${retired}) as retired, (select min(created_at) from ${t} where ${pending}) as oldest`,
      ),
      purge: this.#db.prepare(
        `delete from ${t} where id in (select id from ${t} where published_at is not null and published_at <= ? limit ?)`,
      ),
    } as Statements
  }
}
