import { randomUUID } from 'node:crypto'
import Sqlite from 'better-sqlite3'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ErrorCodes,
  type ClaimResult,
  type Duration,
  type HealthContributor,
} from '@acemq/core'
import {
  assertIdempotencyKey as assertId,
  assertOwnerToken,
  DEFAULT_CLAIM_TIMEOUT,
  DEFAULT_IDEMPOTENCY_RETENTION,
  foreignIdempotencyTable,
  functionOption as fn,
  parseTableName,
  positiveMillis,
  PurgeCadence,
  reportPurgeFailure,
  storeHealthContributor,
  toMillis,
  type ClaimingIdempotencyStore,
} from '@acemq/core/spi'
import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import { openDatabase } from './internal/database.js'
import { sqliteTable, type SqliteTable } from './internal/table-sql.js'

/**
 * Options of {@link SqliteIdempotencyStore}.
 *
 * @example
 * ```ts
 * const options: SqliteIdempotencyStoreOptions = { table: 'orders_seen', retention: '2d' }
 * ```
 */
export interface SqliteIdempotencyStoreOptions {
  /** The table, created beforehand from {@link SqliteIdempotencyStore.createTableSql} (default `acemq_idempotency`); `schema.table` names an attached database. */
  readonly table?: string
  /** How long a confirmed id stays a duplicate (default 1 day). */
  readonly retention?: Duration
  /** How long an unconfirmed claim lives before another caller may take it over (default 5 min). */
  readonly claimTimeout?: Duration
  /** How long a write waits for another connection's lock (default 5 s). Set on a database the store opens; on one you pass, only when given. */
  readonly busyTimeout?: Duration
  /** Purge expired rows on every this-many-th claim (default 100; 0 never purges, for a scheduled {@link SqliteIdempotencyStore.purgeExpired}). */
  readonly purgeEvery?: number
  /** One purge deletes at most this many rows (default 1000). */
  readonly purgeBatchSize?: number
  /** The clock, in epoch milliseconds (default `Date.now`): every process on the machine reads the same one. For tests: it lets a test move time without sleeping. */
  readonly now?: () => number
  /** Told about a purge that failed; the claim that triggered it still succeeds (default `console.warn`). */
  readonly onError?: (error: unknown) => void
}

interface Row {
  readonly owner: string
  readonly claimed_at: number | bigint
  readonly confirmed: number | bigint
  readonly confirmed_at: number | bigint | null
}

interface Statements {
  readonly insert: Sqlite.Statement<[string, string, number]>
  readonly read: Sqlite.Statement<[string], Row>
  readonly takeOver: Sqlite.Statement<[string, number, string, string, number]>
  readonly reclaim: Sqlite.Statement<[string, number, string, number]>
  readonly confirm: Sqlite.Statement<[string, string, number, number]>
  readonly release: Sqlite.Statement<[string, string]>
  readonly purge: Sqlite.Statement<[{ before: number; staleBefore: number; limit: number }]>
  readonly tryClaim: (id: string, owner: string, now: number) => ClaimResult
}

/**
 * An idempotency store in a SQLite file through `better-sqlite3`, safe across processes
 * sharing the file: a claim is an `INSERT ... ON CONFLICT (id) DO NOTHING`, and on a
 * conflict the read-then-write runs in a `BEGIN IMMEDIATE` transaction, so SQLite's write
 * lock decides every race. Given a path, the store opens the file (WAL, busy timeout) and
 * closes it on {@link SqliteIdempotencyStore.close}; given a `Database`, it leaves its life
 * to you. The store never runs DDL: create the table from
 * {@link SqliteIdempotencyStore.createTableSql}.
 *
 * @example
 * ```ts
 * const store = new SqliteIdempotencyStore('./idempotency.db')
 * db.exec(store.createTableSql()) // once, in your migrations
 * ConsumerOptions.defaults().idempotent(store)
 * ```
 */
export class SqliteIdempotencyStore implements ClaimingIdempotencyStore, AsyncDisposable {
  /** The table this store uses. */
  readonly table: string
  /** How long a confirmed id stays a duplicate, in milliseconds. */
  readonly retention: number
  /** How long an unconfirmed claim lives before it may be taken over, in milliseconds. */
  readonly claimTimeout: number

  readonly #db: Sqlite.Database
  readonly #ownsDb: boolean
  readonly #table: SqliteTable
  readonly #cadence: PurgeCadence
  readonly #now: () => number
  readonly #onError: (error: unknown) => void
  /** The owner of the claims this instance takes without an owner token. */
  readonly #token = randomUUID()
  #statements: Statements | undefined
  #closed = false

  /**
   * Opens the store on a `better-sqlite3` database, or on a file path it opens itself. The
   * options are checked here: a bad value throws a `ConfigurationError` naming it.
   *
   * @example
   * ```ts
   * const store = new SqliteIdempotencyStore(new Database('app.db'), { retention: '1d', claimTimeout: '5m' })
   * ```
   */
  constructor(
    databaseOrPath: Sqlite.Database | string,
    options: SqliteIdempotencyStoreOptions = {},
  ) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    this.table = options.table ?? DEFAULT_IDEMPOTENCY_TABLE
    this.#table = sqliteTable(this.table)
    this.retention = positiveMillis(options.retention ?? DEFAULT_IDEMPOTENCY_RETENTION, 'retention')
    this.claimTimeout = positiveMillis(
      options.claimTimeout ?? DEFAULT_CLAIM_TIMEOUT,
      'claimTimeout',
    )
    const busyTimeout =
      options.busyTimeout === undefined ? undefined : toMillis(options.busyTimeout, 'busyTimeout')
    this.#cadence = new PurgeCadence(options)
    this.#now = fn(options.now ?? Date.now, 'now')
    this.#onError = fn(options.onError ?? warn, 'onError')

    const { db, owned } = openDatabase(databaseOrPath, busyTimeout)
    this.#db = db
    this.#ownsDb = owned
  }

  /**
   * The DDL of the idempotency table (default name `acemq_idempotency`), for your
   * migrations: the store never runs it. Run it with `db.exec(sql)`.
   *
   * @example
   * ```ts
   * db.exec(SqliteIdempotencyStore.createTableSql({ table: 'orders_seen' }))
   * ```
   */
  static createTableSql(options: { readonly table?: string } = {}): string {
    return sqliteTable(options.table ?? DEFAULT_IDEMPOTENCY_TABLE).ddl
  }

  /**
   * The DDL of this store's table, for your migrations: the store never runs it.
   *
   * @example
   * ```ts
   * db.exec(store.createTableSql())
   * ```
   */
  createTableSql(): string {
    return this.#table.ddl
  }

  /**
   * Claims `id` for `owner` (default: this store instance's own token) with one insert, and
   * on a conflict in one `BEGIN IMMEDIATE` transaction: `'claimed'` when it is new, expired,
   * or its claim is older than the claim timeout (taken over, the row now naming `owner`);
   * `'duplicate'` when it was confirmed within the retention; `'in_progress'` when a live
   * claim is held — by anyone, the same owner included. Any database error rejects: it is
   * never read as "taken".
   *
   * @example
   * ```ts
   * if ((await store.tryClaim(message.envelope.id, randomUUID())) === 'claimed') await handle(message)
   * ```
   */
  async tryClaim(id: string, owner?: string): Promise<ClaimResult> {
    assertId(id)
    assertOwnerToken(owner)
    const result = this.#prepared().tryClaim(id, owner ?? this.#token, this.#now())
    this.#maybePurge()
    return result
  }

  /**
   * Claims `id`; true when this caller holds the claim now.
   *
   * @example
   * ```ts
   * if (await store.claim(id)) { ... }
   * ```
   */
  async claim(id: string, owner?: string): Promise<boolean> {
    return (await this.tryClaim(id, owner)) === 'claimed'
  }

  /**
   * Marks `id` handled: a duplicate for the retention from now on. The id is recorded
   * whoever holds the claim — even when `owner`'s claim was taken over meanwhile, or the row
   * is gone — because the work did happen and must not be done again.
   *
   * @example
   * ```ts
   * await handle(message); await store.confirm(message.envelope.id, owner)
   * ```
   */
  async confirm(id: string, owner?: string): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    const statements = this.#prepared()
    const now = this.#now()
    requireChanged(statements.confirm.run(id, owner ?? this.#token, now, now).changes, 'confirm')
  }

  /**
   * Gives up `owner`'s claim on `id` (default: this store instance's) so a retry can take
   * it. Deletes the row only while it is still `owner`'s unconfirmed claim: a stale owner
   * releasing late frees nothing.
   *
   * @example
   * ```ts
   * try { await handle(message) } catch (e) { await store.release(message.envelope.id, owner); throw e }
   * ```
   */
  async release(id: string, owner?: string): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    this.#prepared().release.run(id, owner ?? this.#token)
  }

  /**
   * Whether `id` was confirmed within the retention.
   *
   * @example
   * ```ts
   * if (await store.isConfirmed(id)) console.log('already handled')
   * ```
   */
  async isConfirmed(id: string): Promise<boolean> {
    assertId(id)
    const row = this.#prepared().read.get(id)
    return (
      row !== undefined && isConfirmedRow(row) && this.#now() - confirmedAt(row) <= this.retention
    )
  }

  /**
   * Checks, at start-up, that the table exists with the columns the store uses and that the
   * file answers: resolves, or rejects with `ACEMQ_STORE_TABLE_MISSING` (and the way to create
   * the table) or SQLite's own error. Consumers on a store whose table is missing never run a
   * handler: call this before consuming, so the service fails at once instead.
   *
   * @example
   * ```ts
   * await store.verify() // before mq.consume(...)
   * ```
   */
  async verify(): Promise<void> {
    this.#prepared().read.get('')
  }

  /**
   * A health contributor for `mq.registerHealth()`: `UP` while {@link verify} succeeds,
   * `DEGRADED` with the `error` (and its `code`) while it fails — a missing table, a locked or
   * unreadable file. Not `DOWN`: restarting the process would not mend the file. Named
   * `idempotency-store` unless `name` is given (two stores need two names).
   *
   * @example
   * ```ts
   * mq.registerHealth(store.healthContributor())
   * ```
   */
  healthContributor(options: { readonly name?: string } = {}): HealthContributor {
    return storeHealthContributor(options.name ?? 'idempotency-store', this.table, () =>
      this.verify(),
    )
  }

  /**
   * Deletes at most `purgeBatchSize` rows that are past the retention (confirmed) or past
   * both the retention and the claim timeout (unconfirmed), and returns how many. Claims
   * call it every `purgeEvery` times; call it yourself on a schedule with `purgeEvery: 0`.
   *
   * @example
   * ```ts
   * while ((await store.purgeExpired()) > 0) {}
   * ```
   */
  async purgeExpired(): Promise<number> {
    return this.#purge()
  }

  /**
   * Closes the database when the store opened it from a path; a database you passed stays
   * open. Later calls reject with `ClosedError`. Safe to call twice.
   *
   * @example
   * ```ts
   * await store.close()
   * ```
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    if (this.#ownsDb) this.#db.close()
  }

  /** Same as {@link SqliteIdempotencyStore.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  #purge(): number {
    const now = this.#now()
    const { changes } = this.#prepared().purge.run({
      before: now - this.retention,
      staleBefore: now - Math.max(this.retention, this.claimTimeout),
      limit: this.#cadence.batchSize,
    })
    return changes
  }

  #maybePurge(): void {
    if (!this.#cadence.claimed()) return
    try {
      this.#purge()
    } catch (error) {
      // A failed purge must not fail the claim that happened to trigger it.
      reportPurgeFailure(this.#onError, error)
    }
  }

  /** Prepares every statement once, on first use (the table may be created after the store). */
  #prepared(): Statements {
    if (this.#closed) throw new ClosedError('the SQLite idempotency store is closed')
    if (this.#statements !== undefined) return this.#statements
    try {
      this.#statements = this.#prepare()
    } catch (error) {
      if (error instanceof Error && /no such table/i.test(error.message)) {
        throw new AceMqError(
          `the idempotency table ${this.#table.quoted} does not exist: create it with store.createTableSql() in a migration`,
          { code: ErrorCodes.STORE_TABLE_MISSING, cause: error },
        )
      }
      if (error instanceof Error && /no such column|has no column named/i.test(error.message)) {
        const foreign = this.#foreignTable()
        if (foreign !== undefined) {
          throw new AceMqError(foreign, { code: ErrorCodes.STORE_TABLE_MISSING, cause: error })
        }
      }
      throw error
    }
    return this.#statements
  }

  /**
   * Why the existing table is not one this store can use — another AceMQ library's layout, or
   * columns missing (docs/design.md §7) — or undefined when it cannot be told.
   */
  #foreignTable(): string | undefined {
    const [schema, name] = parseTableName(this.table)
    try {
      const columns = this.#db
        .prepare<[string, string], { name: string; type: string }>(
          'SELECT name, type FROM pragma_table_info(?, ?) ORDER BY cid',
        )
        .all(name, schema ?? 'main')
      return foreignIdempotencyTable(this.table, columns)
    } catch {
      // The table cannot be described: SQLite's own error says the most.
      return undefined
    }
  }

  #prepare(): Statements {
    const db = this.#db
    const t = this.#table.quoted
    const insert = db.prepare<[string, string, number]>(
      `INSERT INTO ${t} (id, owner, claimed_at, confirmed, confirmed_at) VALUES (?, ?, ?, 0, NULL) ON CONFLICT (id) DO NOTHING`,
    )
    const read = db.prepare<[string], Row>(
      `SELECT owner, claimed_at, confirmed, confirmed_at FROM ${t} WHERE id = ?`,
    )
    const takeOver = db.prepare<[string, number, string, string, number]>(
      `UPDATE ${t} SET owner = ?, claimed_at = ? WHERE id = ? AND owner = ? AND confirmed = 0 AND claimed_at < ?`,
    )
    const reclaim = db.prepare<[string, number, string, number]>(
      `UPDATE ${t} SET owner = ?, claimed_at = ?, confirmed = 0, confirmed_at = NULL WHERE id = ? AND confirmed = 1 AND COALESCE(confirmed_at, claimed_at) < ?`,
    )
    const confirm = db.prepare<[string, string, number, number]>(
      `INSERT INTO ${t} (id, owner, claimed_at, confirmed, confirmed_at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (id) DO UPDATE SET confirmed = 1, confirmed_at = excluded.confirmed_at`,
    )
    const release = db.prepare<[string, string]>(
      `DELETE FROM ${t} WHERE id = ? AND owner = ? AND confirmed = 0`,
    )
    const expired = `claimed_at < @before AND ((confirmed = 1 AND COALESCE(confirmed_at, claimed_at) < @before) OR (confirmed = 0 AND claimed_at < @staleBefore))`
    const purge = db.prepare<[{ before: number; staleBefore: number; limit: number }]>(
      `DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} WHERE ${expired} LIMIT @limit)`,
    )
    const retention = this.retention
    const claimTimeout = this.claimTimeout
    const claimInTransaction = db.transaction(
      (id: string, owner: string, now: number): ClaimResult => {
        if (insert.run(id, owner, now).changes === 1) return 'claimed'
        const row = read.get(id)
        if (row === undefined) {
          // The write lock is held, so the conflicting row cannot have gone.
          throw new AceMqError(`the claim on ${JSON.stringify(id)} conflicted with no row`, {
            code: ErrorCodes.STORE_INCONSISTENT,
          })
        }
        if (isConfirmedRow(row)) {
          if (now - confirmedAt(row) <= retention) return 'duplicate'
          requireChanged(reclaim.run(owner, now, id, now - retention).changes, 'reclaim')
          return 'claimed'
        }
        if (now - Number(row.claimed_at) <= claimTimeout) return 'in_progress'
        requireChanged(
          takeOver.run(owner, now, id, row.owner, now - claimTimeout).changes,
          'take over',
        )
        return 'claimed'
      },
    )
    return {
      insert,
      read,
      takeOver,
      reclaim,
      confirm,
      release,
      purge,
      // A new id needs no transaction: the INSERT is atomic on its own, and the explicit
      // BEGIN IMMEDIATE ... COMMIT around it cost 5–8 % more CPU per claim + confirm
      // (bench/src/experiments/sqlite-claim.ts). Only a conflict reads then writes, in the
      // transaction (which tries the insert again, in case the row went away in between).
      tryClaim: (id, owner, now) =>
        insert.run(id, owner, now).changes === 1
          ? 'claimed'
          : claimInTransaction.immediate(id, owner, now),
    }
  }
}

function isConfirmedRow(row: Row): boolean {
  return Number(row.confirmed) === 1
}

function confirmedAt(row: Row): number {
  return Number(row.confirmed_at ?? row.claimed_at)
}

function requireChanged(changes: number, what: string): void {
  if (changes !== 1) {
    throw new AceMqError(
      `the idempotency ${what} changed ${String(changes)} rows instead of 1; refusing to guess`,
      { code: ErrorCodes.STORE_INCONSISTENT },
    )
  }
}

function warn(error: unknown): void {
  console.warn('acemq: purging expired idempotency rows failed; claims are unaffected', error)
}
