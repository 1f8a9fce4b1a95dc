import { randomUUID } from 'node:crypto'
import type { QueryExecutor, QueryResult } from 'kysely'
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
  functionOption as fn,
  parseTableName,
  positiveMillis,
  PurgeCadence,
  reportPurgeFailure,
  storeHealthContributor,
  type ClaimingIdempotencyStore,
} from '@acemq/core/spi'
import { DEFAULT_IDEMPOTENCY_TABLE } from './constants.js'
import { createTableSql } from './create-table-sql.js'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import {
  affected,
  isDuplicateKey,
  statements,
  toBoolean,
  toNumber,
  type Statements,
} from './idempotency-statements.js'
import { explainTableTrouble } from './idempotency-table-check.js'
import { Batch } from './internal/batch.js'
import type { Prepared } from './internal/prepared.js'
import { queryExecutor } from './internal/executor.js'
import type { KyselyDatabase } from './kysely-database.js'

/**
 * Options of {@link KyselyIdempotencyStore}.
 *
 * @example
 * ```ts
 * const options: KyselyIdempotencyStoreOptions = { table: 'app.seen_messages', retention: '2d' }
 * ```
 */
export interface KyselyIdempotencyStoreOptions {
  /** The table, created beforehand from `createTableSql` or `idempotencyMigration` (default `acemq_idempotency`); may be `schema.table`. */
  readonly table?: string
  /** How long a confirmed id stays a duplicate (default 1 day). */
  readonly retention?: Duration
  /** How long an unconfirmed claim lives before another consumer may take it over (default 5 min). */
  readonly claimTimeout?: Duration
  /** Purge expired rows in the background on every this-many-th claim (default 100; 0 never purges, for a scheduled {@link KyselyIdempotencyStore.purgeExpired}). */
  readonly purgeEvery?: number
  /** One purge deletes at most this many rows (default 1000). */
  readonly purgeBatchSize?: number
  /** The SQL to write (default: told from the Kysely adapter). */
  readonly dialect?: IdempotencyDialect
  /**
   * The clock, in epoch milliseconds. Default: the database server's clock on Postgres and
   * MySQL / MariaDB, so hosts whose clocks disagree still agree on every lease; `Date.now` on
   * SQLite, whose processes share one machine's clock. Given, every timestamp is this
   * clock's, on every dialect: for tests that move time without sleeping.
   */
  readonly now?: () => number
  /** Told about a background purge that failed; claims are unaffected (default `console.warn`). */
  readonly onError?: (error: unknown) => void
}

interface Row {
  readonly owner: string
  readonly claimedAt: number
  readonly confirmed: boolean
  readonly confirmedAt: number
  /** The store's clock when the row was read: the database's, or the `now` option's. */
  readonly now: number
}

/** How many insert / read / update rounds a claim may take when rows keep changing under it. */
const MAX_ROUNDS = 5

/**
 * An idempotency store on any Kysely database (Postgres through `pg` is the tested default;
 * SQLite and MySQL are written too). The primary key arbitrates every claim
 * (`INSERT ... ON CONFLICT (id) DO NOTHING`; on MySQL a plain insert where only a
 * duplicate-key error means taken) and a stale claim is taken over by a conditional
 * `UPDATE` that exactly one racer wins. On Postgres and MySQL every timestamp is the
 * database server's, so application hosts with skewed clocks still agree on every lease.
 * Any other database error rejects, so the message is retried rather than acked. The store
 * never runs DDL: create the table with {@link createTableSql} or {@link idempotencyMigration}.
 *
 * @example
 * ```ts
 * const store = new KyselyIdempotencyStore(db, { retention: '1d' })
 * await mq.consume('orders.placed', ConsumerOptions.defaults().idempotent(store), handle)
 * ```
 */
export class KyselyIdempotencyStore implements ClaimingIdempotencyStore, AsyncDisposable {
  /** The table this store uses. */
  readonly table: string
  /** The SQL this store writes. */
  readonly dialect: IdempotencyDialect
  /** How long a confirmed id stays a duplicate, in milliseconds. */
  readonly retention: number
  /** How long an unconfirmed claim lives before it may be taken over, in milliseconds. */
  readonly claimTimeout: number

  /** The Kysely instance's executor without the caller's plugins. */
  readonly #executor: QueryExecutor
  readonly #sql: Statements
  readonly #cadence: PurgeCadence
  /** The `now` option; undefined when the database's clock decides. */
  readonly #now: (() => number) | undefined
  readonly #onError: (error: unknown) => void
  /** The owner of the claims this instance takes without an owner token. */
  readonly #token = randomUUID()
  /** Postgres: concurrent first claims, and concurrent confirms, each go in one statement. */
  readonly #claimBatch: Batch<Claimant, boolean> | undefined
  readonly #confirmBatch: Batch<Claimant, void> | undefined
  #purging: Promise<void> | undefined
  #closed = false

  /**
   * Creates the store on a Kysely instance (any `Kysely<DB>`). The options are checked here:
   * a bad value throws a `ConfigurationError` naming it.
   *
   * @example
   * ```ts
   * const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new Pool({ connectionString }) }) })
   * const store = new KyselyIdempotencyStore(db, { table: 'acemq_idempotency', claimTimeout: '5m' })
   * ```
   */
  constructor(db: KyselyDatabase, options: KyselyIdempotencyStoreOptions = {}) {
    if (typeof db !== 'object' || db === null || typeof db.getExecutor !== 'function') {
      throw new ConfigurationError(`db must be a Kysely instance; got ${String(db)}`)
    }
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    this.table = options.table ?? DEFAULT_IDEMPOTENCY_TABLE
    parseTableName(this.table)
    this.retention = positiveMillis(options.retention ?? DEFAULT_IDEMPOTENCY_RETENTION, 'retention')
    this.claimTimeout = positiveMillis(
      options.claimTimeout ?? DEFAULT_CLAIM_TIMEOUT,
      'claimTimeout',
    )
    this.#cadence = new PurgeCadence(options)
    this.#onError = fn(options.onError ?? warn, 'onError')
    this.dialect = options.dialect === undefined ? detectDialect(db) : checkDialect(options.dialect)
    this.#now =
      options.now !== undefined
        ? fn(options.now, 'now')
        : // SQLite has no server: every process using the file reads this machine's clock.
          this.dialect === 'sqlite'
          ? Date.now
          : undefined
    // The store's SQL must not be rewritten by the caller's plugins (CamelCasePlugin would
    // rename the columns it reads back), and is compiled once: building each statement anew
    // cost ~24 µs of CPU per message (BENCHMARKS.md).
    this.#executor = queryExecutor(db).withoutPlugins()
    this.#sql = statements(this.#executor, this.table, this.dialect, {
      purgeBatchSize: this.#cadence.batchSize,
      retention: this.retention,
      claimTimeout: this.claimTimeout,
      databaseClock: this.#now === undefined,
    })
    const { insertMany, confirmMany } = this.#sql
    if (insertMany !== undefined) {
      this.#claimBatch = new Batch((claims) => this.#insertMany(insertMany, claims), MAX_BATCH)
    }
    if (confirmMany !== undefined) {
      this.#confirmBatch = new Batch((claims) => this.#confirmMany(confirmMany, claims), MAX_BATCH)
    }
  }

  /**
   * The DDL of this store's table in its dialect, for your migrations: the store never
   * runs it.
   *
   * @example
   * ```ts
   * await sql.raw(store.createTableSql()).execute(db) // Postgres runs several statements at once
   * ```
   */
  createTableSql(): string {
    return createTableSql({ table: this.table, dialect: this.dialect })
  }

  /**
   * Claims `id` for `owner` (default: this store instance's own token): `'claimed'` when it
   * is new, expired, or its claim is older than the claim timeout (taken over by a
   * conditional update exactly one racer wins, the row now naming `owner`); `'duplicate'`
   * when it was confirmed within the retention; `'in_progress'` when a live claim is held —
   * by anyone, the same owner included. Any database error other than a duplicate key
   * rejects, and so does an affected-row count the driver does not report: neither is ever
   * read as "taken".
   *
   * @example
   * ```ts
   * if ((await store.tryClaim(message.envelope.id, randomUUID())) === 'claimed') await handle(message)
   * ```
   */
  async tryClaim(id: string, owner: string = this.#token): Promise<ClaimResult> {
    assertId(id)
    assertOwnerToken(owner)
    this.#assertOpen()
    this.#maybePurge()
    try {
      for (let round = 0; round < MAX_ROUNDS; round++) {
        // Undefined when the database's clock decides: the statements then read it themselves.
        const now = this.#now?.()
        // Postgres and SQLite insert inline: one async frame less per message.
        const inserted =
          this.dialect === 'mysql'
            ? await this.#insertMysql(id, owner, now)
            : round === 0 && batchable(this.#claimBatch, id)
              ? await this.#claimBatch.add({ id, owner })
              : affected(await this.#sql.insert({ id, owner, now }), 'claim') === 1
        if (inserted) return 'claimed'
        const row = await this.#read(id, now)
        // Released or purged since the insert conflicted: insert again.
        if (row === undefined) continue
        if (row.confirmed) {
          if (row.now - row.confirmedAt <= this.retention) return 'duplicate'
          const result = await this.#sql.reclaim({ id, owner, now })
          if (affected(result, 'reclaim') === 1) return 'claimed'
        } else {
          if (row.now - row.claimedAt <= this.claimTimeout) return 'in_progress'
          const result = await this.#sql.takeOver({ id, owner, now, staleOwner: row.owner })
          if (affected(result, 'take over') === 1) return 'claimed'
        }
        // Someone else changed the row first: look again.
      }
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
    throw new AceMqError(
      `the claim on ${JSON.stringify(id)} kept changing under this store for ${MAX_ROUNDS} rounds; not guessing`,
      { code: ErrorCodes.STORE_CONTENDED },
    )
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
   * Marks `id` handled, in one upsert: a duplicate for the retention from now on. The id is
   * recorded whoever holds the claim — even when `owner`'s claim was taken over meanwhile,
   * or the row is gone — because the work did happen and must not be done again.
   *
   * @example
   * ```ts
   * await handle(message); await store.confirm(message.envelope.id, owner)
   * ```
   */
  async confirm(id: string, owner: string = this.#token): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    this.#assertOpen()
    try {
      if (batchable(this.#confirmBatch, id)) await this.#confirmBatch.add({ id, owner })
      else affected(await this.#sql.confirm({ id, owner, now: this.#now?.() }), 'confirm')
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
  }

  /**
   * Gives up `owner`'s claim on `id` (default: this store instance's) so a retry can take
   * it: deletes the row only while it is still `owner`'s unconfirmed claim, so a stale owner
   * releasing late frees nothing.
   *
   * @example
   * ```ts
   * try { await handle(message) } catch (e) { await store.release(message.envelope.id, owner); throw e }
   * ```
   */
  async release(id: string, owner: string = this.#token): Promise<void> {
    assertId(id)
    assertOwnerToken(owner)
    this.#assertOpen()
    try {
      await this.#sql.release({ id, owner })
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
  }

  /**
   * Whether `id` was confirmed within the retention (an expired row counts as absent).
   *
   * @example
   * ```ts
   * if (await store.isConfirmed(id)) console.log('already handled')
   * ```
   */
  async isConfirmed(id: string): Promise<boolean> {
    assertId(id)
    this.#assertOpen()
    try {
      const row = await this.#read(id, this.#now?.())
      return row !== undefined && row.confirmed && row.now - row.confirmedAt <= this.retention
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
  }

  /**
   * Checks, at start-up, that the table exists with the columns the store reads and that the
   * database answers: resolves, or rejects with `ACEMQ_STORE_TABLE_MISSING` (and the way to
   * create the table) or the database's own error. Consumers on a store whose table is missing
   * never run a handler: call this before consuming, so the service fails at once instead.
   *
   * @example
   * ```ts
   * await store.verify() // before mq.consume(...)
   * ```
   */
  async verify(): Promise<void> {
    this.#assertOpen()
    try {
      await this.#sql.read({ id: '', now: this.#now?.() })
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
  }

  /**
   * A health contributor for `mq.registerHealth()`: `UP` while {@link verify} succeeds,
   * `DEGRADED` with the `error` (and its `code`) while it fails — a missing table, a database
   * that does not answer. Not `DOWN`: restarting the process would not bring the database back.
   * Named `idempotency-store` unless `name` is given (two stores need two names).
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
   * Deletes at most `purgeBatchSize` expired rows — confirmed ones past the retention,
   * unconfirmed ones past both the retention and the claim timeout — and returns how many.
   * Claims run it in the background every `purgeEvery` times; with `purgeEvery: 0` call it
   * yourself on a schedule.
   *
   * @example
   * ```ts
   * while ((await store.purgeExpired()) > 0) {}
   * ```
   */
  async purgeExpired(): Promise<number> {
    this.#assertOpen()
    try {
      return await this.#purge()
    } catch (error) {
      throw await this.#tableTrouble(error)
    }
  }

  /**
   * Stops background purging and waits for a purge that is running. The Kysely instance is
   * yours and stays open; destroy it after this. Later calls reject with `ClosedError`.
   *
   * @example
   * ```ts
   * await store.close(); await db.destroy()
   * ```
   */
  async close(): Promise<void> {
    this.#closed = true
    await this.#purging
  }

  /** Same as {@link KyselyIdempotencyStore.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** True when this insert made the row; false only when the primary key already had it. */
  async #insertMysql(id: string, owner: string, now: number | undefined): Promise<boolean> {
    // INSERT IGNORE would also swallow NOT NULL, truncation and trigger errors: only the
    // duplicate key may mean "taken".
    try {
      return affected(await this.#sql.insert({ id, owner, now }), 'claim') === 1
    } catch (error) {
      if (isDuplicateKey(error)) return false
      throw error
    }
  }

  async #read(id: string, now: number | undefined): Promise<Row | undefined> {
    const { rows } = await this.#sql.read({ id, now })
    const raw = rows[0]
    if (raw === undefined) return undefined
    const claimedAt = toNumber(raw['claimed_at'], 'claimed_at')
    return {
      now: toNumber(raw['now_ms'], 'the clock'),
      owner: String(raw['owner']),
      claimedAt,
      confirmed: toBoolean(raw['confirmed']),
      confirmedAt:
        raw['confirmed_at'] === null || raw['confirmed_at'] === undefined
          ? claimedAt
          : toNumber(raw['confirmed_at'], 'confirmed_at'),
    }
  }

  /** One insert for a batch of first claims: which of them took their row. */
  async #insertMany(
    insertMany: Prepared<'ids' | 'owners' | 'now'>,
    claims: readonly Claimant[],
  ): Promise<boolean[]> {
    const result = await this.#runBatch(insertMany, claims)
    const inserted = new Set(result.rows.map((row) => (row as { id: unknown }).id))
    return claims.map((claim) => inserted.has(claim.id))
  }

  /** One upsert for a batch of confirms (every id in it once). */
  async #confirmMany(
    confirmMany: Prepared<'ids' | 'owners' | 'now'>,
    claims: readonly Claimant[],
  ): Promise<void[]> {
    affected(await this.#runBatch(confirmMany, claims), 'confirm')
    return claims.map(() => undefined)
  }

  /**
   * Runs a batched statement with the claims in id order: two batches that share ids then never
   * wait for each other's rows in a cycle.
   */
  #runBatch(
    statement: Prepared<'ids' | 'owners' | 'now'>,
    claims: readonly Claimant[],
  ): Promise<QueryResult<unknown>> {
    const sorted = [...claims].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    return statement({
      ids: sorted.map((claim) => claim.id),
      owners: sorted.map((claim) => claim.owner),
      now: this.#now?.(),
    })
  }

  async #purge(): Promise<number> {
    return affected(await this.#sql.purge({ now: this.#now?.() }), 'purge')
  }

  #maybePurge(): void {
    if (!this.#cadence.claimed() || this.#purging !== undefined) return
    // In the background: a purge must neither slow nor fail the claim that triggered it.
    this.#purging = this.#purge().then(
      () => {
        this.#purging = undefined
      },
      (error: unknown) => {
        this.#purging = undefined
        // The reporter failing must not become an unhandled rejection.
        reportPurgeFailure(this.#onError, error)
      },
    )
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('the Kysely idempotency store is closed')
  }

  /** A missing table, or another AceMQ library's table of the same name, said in words. */
  #tableTrouble(error: unknown): Promise<unknown> {
    return explainTableTrouble(error, {
      table: this.table,
      dialect: this.dialect,
      executor: this.#executor,
    })
  }
}

/** One claim or confirm waiting for its batch. */
interface Claimant {
  readonly id: string
  readonly owner: string
}

/** The most claims (or confirms) one batched statement carries. */
const MAX_BATCH = 500

/** Whether `id` can join `batch`'s next statement: not when that statement has it already. */
function batchable<T>(
  batch: Batch<Claimant, T> | undefined,
  id: string,
): batch is Batch<Claimant, T> {
  return batch !== undefined && !batch.waiting.some((call) => call.input.id === id)
}

function warn(error: unknown): void {
  console.warn('acemq: purging expired idempotency rows failed; claims are unaffected', error)
}
