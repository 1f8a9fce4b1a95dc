import { randomUUID } from 'node:crypto'
import { sql, type QueryExecutor, type QueryResult } from 'kysely'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  DEFAULT_CLAIM_TIMEOUT,
  DEFAULT_IDEMPOTENCY_RETENTION,
  type ClaimResult,
  type ClaimingIdempotencyStore,
  type Duration,
} from '@acemq/core'
import {
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
} from './constants.js'
import { createTableSql } from './create-table-sql.js'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import {
  assertId,
  assertOwnerToken,
  fn,
  integerAtLeast,
  parseTableName,
  positiveMillis,
} from './internal/validate.js'
import { prepare, type Prepared } from './internal/prepared.js'
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
  /** The clock, in epoch milliseconds (default `Date.now`). For tests: it lets a test move time without sleeping. Every timestamp is this clock's, never the database's. */
  readonly now?: () => number
  /** Told about a background purge that failed; claims are unaffected (default `console.warn`). */
  readonly onError?: (error: unknown) => void
}

interface Row {
  readonly owner: string
  readonly claimedAt: number
  readonly confirmed: boolean
  readonly confirmedAt: number
}

/** How many insert / read / update rounds a claim may take when rows keep changing under it. */
const MAX_ROUNDS = 5

/**
 * An idempotency store on any Kysely database (Postgres through `pg` is the tested default;
 * SQLite and MySQL are written too). The primary key arbitrates every claim
 * (`INSERT ... ON CONFLICT (id) DO NOTHING`; on MySQL a plain insert where only a
 * duplicate-key error means taken) and a stale claim is taken over by a conditional
 * `UPDATE` that exactly one racer wins. Any other database error rejects, so the message is
 * retried rather than acked. The store never runs DDL: create the table with
 * {@link createTableSql} or {@link idempotencyMigration}.
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

  readonly #sql: Statements
  readonly #purgeEvery: number
  readonly #purgeBatchSize: number
  readonly #now: () => number
  readonly #onError: (error: unknown) => void
  /** The owner of the claims this instance takes without an owner token. */
  readonly #token = randomUUID()
  #claims = 0
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
    this.#purgeEvery = integerAtLeast(options.purgeEvery ?? DEFAULT_PURGE_EVERY, 0, 'purgeEvery')
    this.#purgeBatchSize = integerAtLeast(
      options.purgeBatchSize ?? DEFAULT_PURGE_BATCH_SIZE,
      1,
      'purgeBatchSize',
    )
    this.#now = fn(options.now ?? Date.now, 'now')
    this.#onError = fn(options.onError ?? warn, 'onError')
    this.dialect = options.dialect === undefined ? detectDialect(db) : checkDialect(options.dialect)
    // The store's SQL must not be rewritten by the caller's plugins (CamelCasePlugin would
    // rename the columns it reads back), and is compiled once: building each statement anew
    // cost ~24 µs of CPU per message (BENCHMARKS.md).
    this.#sql = statements(db.getExecutor().withoutPlugins(), this.table, this.dialect, {
      purgeBatchSize: this.#purgeBatchSize,
    })
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
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const now = this.#now()
      // Postgres and SQLite insert inline: one async frame less per message.
      const inserted =
        this.dialect === 'mysql'
          ? await this.#insertMysql(id, owner, now)
          : affected(await this.#sql.insert({ id, owner, now }), 'claim') === 1
      if (inserted) return 'claimed'
      const row = await this.#read(id)
      // Released or purged since the insert conflicted: insert again.
      if (row === undefined) continue
      if (row.confirmed) {
        if (now - row.confirmedAt <= this.retention) return 'duplicate'
        if (await this.#reclaim(id, owner, now)) return 'claimed'
      } else {
        if (now - row.claimedAt <= this.claimTimeout) return 'in_progress'
        if (await this.#takeOver(id, owner, row.owner, now)) return 'claimed'
      }
      // Someone else changed the row first: look again.
    }
    throw new AceMqError(
      `the claim on ${JSON.stringify(id)} kept changing under this store for ${MAX_ROUNDS} rounds; not guessing`,
      { code: 'ACEMQ_STORE_CONTENDED' },
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
    affected(await this.#sql.confirm({ id, owner, now: this.#now() }), 'confirm')
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
    await this.#sql.release({ id, owner })
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
    const row = await this.#read(id)
    return row !== undefined && row.confirmed && this.#now() - row.confirmedAt <= this.retention
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
    return this.#purge()
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
  async #insertMysql(id: string, owner: string, now: number): Promise<boolean> {
    // INSERT IGNORE would also swallow NOT NULL, truncation and trigger errors: only the
    // duplicate key may mean "taken".
    try {
      return affected(await this.#sql.insert({ id, owner, now }), 'claim') === 1
    } catch (error) {
      if (isDuplicateKey(error)) return false
      throw error
    }
  }

  async #read(id: string): Promise<Row | undefined> {
    const { rows } = await this.#sql.read({ id })
    const raw = rows[0]
    if (raw === undefined) return undefined
    const claimedAt = toNumber(raw['claimed_at'], 'claimed_at')
    return {
      owner: String(raw['owner']),
      claimedAt,
      confirmed: toBoolean(raw['confirmed']),
      confirmedAt:
        raw['confirmed_at'] === null || raw['confirmed_at'] === undefined
          ? claimedAt
          : toNumber(raw['confirmed_at'], 'confirmed_at'),
    }
  }

  /** Takes over a stale claim; only the racer whose update still finds it stale wins. */
  async #takeOver(id: string, owner: string, staleOwner: string, now: number): Promise<boolean> {
    const result = await this.#sql.takeOver({
      id,
      owner,
      now,
      staleOwner,
      staleBefore: now - this.claimTimeout,
    })
    return affected(result, 'take over') === 1
  }

  /** Claims again an id whose confirmation is past the retention (the row counts as absent). */
  async #reclaim(id: string, owner: string, now: number): Promise<boolean> {
    const result = await this.#sql.reclaim({
      id,
      owner,
      now,
      expiredBefore: now - this.retention,
    })
    return affected(result, 'reclaim') === 1
  }

  async #purge(): Promise<number> {
    const now = this.#now()
    const result = await this.#sql.purge({
      before: now - this.retention,
      staleBefore: now - Math.max(this.retention, this.claimTimeout),
    })
    return affected(result, 'purge')
  }

  #maybePurge(): void {
    if (this.#purgeEvery === 0 || ++this.#claims % this.#purgeEvery !== 0) return
    if (this.#purging !== undefined) return
    // In the background: a purge must neither slow nor fail the claim that triggered it.
    this.#purging = this.#purge().then(
      () => {
        this.#purging = undefined
      },
      (error: unknown) => {
        this.#purging = undefined
        try {
          this.#onError(error)
        } catch {
          // The reporter failing must not become an unhandled rejection.
        }
      },
    )
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('the Kysely idempotency store is closed')
  }
}

interface Statements {
  readonly insert: Prepared<'id' | 'owner' | 'now'>
  readonly read: Prepared<'id', Record<string, unknown>>
  readonly takeOver: Prepared<'id' | 'owner' | 'now' | 'staleOwner' | 'staleBefore'>
  readonly reclaim: Prepared<'id' | 'owner' | 'now' | 'expiredBefore'>
  readonly confirm: Prepared<'id' | 'owner' | 'now'>
  readonly release: Prepared<'id' | 'owner'>
  readonly purge: Prepared<'before' | 'staleBefore'>
}

/** Every statement the store runs, compiled once for its table and dialect. */
function statements(
  executor: QueryExecutor,
  table: string,
  dialect: IdempotencyDialect,
  { purgeBatchSize }: { readonly purgeBatchSize: number },
): Statements {
  const t = sql.table(table)
  const yes = sql.raw(dialect === 'sqlite' ? '1' : 'true')
  const no = sql.raw(dialect === 'sqlite' ? '0' : 'false')
  const columns = sql`(id, owner, claimed_at, confirmed, confirmed_at)`
  const mysql = dialect === 'mysql'
  return {
    insert: prepare(executor, ['id', 'owner', 'now'], ($) => {
      const insert = sql`insert into ${t} ${columns} values (${$.id}, ${$.owner}, ${$.now}, ${no}, null)`
      return mysql ? insert : sql`${insert} on conflict (id) do nothing`
    }),
    read: prepare(
      executor,
      ['id'],
      ($) => sql`select owner, claimed_at, confirmed, confirmed_at from ${t} where id = ${$.id}`,
    ),
    takeOver: prepare(
      executor,
      ['id', 'owner', 'now', 'staleOwner', 'staleBefore'],
      ($) =>
        sql`update ${t} set owner = ${$.owner}, claimed_at = ${$.now} where id = ${$.id} and owner = ${$.staleOwner} and confirmed = ${no} and claimed_at < ${$.staleBefore}`,
    ),
    reclaim: prepare(
      executor,
      ['id', 'owner', 'now', 'expiredBefore'],
      ($) =>
        sql`update ${t} set owner = ${$.owner}, claimed_at = ${$.now}, confirmed = ${no}, confirmed_at = null where id = ${$.id} and confirmed = ${yes} and coalesce(confirmed_at, claimed_at) < ${$.expiredBefore}`,
    ),
    confirm: prepare(executor, ['id', 'owner', 'now'], ($) => {
      const values = sql`values (${$.id}, ${$.owner}, ${$.now}, ${yes}, ${$.now})`
      return mysql
        ? sql`insert into ${t} ${columns} ${values} on duplicate key update confirmed = ${yes}, confirmed_at = ${$.now}`
        : sql`insert into ${t} ${columns} ${values} on conflict (id) do update set confirmed = ${yes}, confirmed_at = ${$.now}`
    }),
    release: prepare(
      executor,
      ['id', 'owner'],
      ($) => sql`delete from ${t} where id = ${$.id} and owner = ${$.owner} and confirmed = ${no}`,
    ),
    purge: prepare(executor, ['before', 'staleBefore'], ($) => {
      // claimed_at bounds both branches, so the claimed_at index finds the candidates.
      const expired = sql`claimed_at < ${$.before} and ((confirmed = ${yes} and coalesce(confirmed_at, claimed_at) < ${$.before}) or (confirmed = ${no} and claimed_at < ${$.staleBefore}))`
      const limit = sql.lit(purgeBatchSize)
      return mysql
        ? sql`delete from ${t} where ${expired} limit ${limit}`
        : // The outer condition is checked again on rows a concurrent claim just changed.
          sql`delete from ${t} where id in (select id from ${t} where ${expired} limit ${limit}) and ${expired}`
    }),
  }
}

/** The affected-row count, or an error when the driver did not report one: unknown is never "taken". */
function affected(result: QueryResult<unknown>, what: string): number {
  if (typeof result.numAffectedRows !== 'bigint') {
    throw new AceMqError(
      `the database did not report how many rows the idempotency ${what} affected; refusing to guess`,
      { code: 'ACEMQ_STORE_RESULT_UNKNOWN' },
    )
  }
  return Number(result.numAffectedRows)
}

function isDuplicateKey(error: unknown): boolean {
  const { errno, code } = (error ?? {}) as { errno?: unknown; code?: unknown }
  return errno === 1062 || code === 'ER_DUP_ENTRY'
}

function toNumber(value: unknown, column: string): number {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'bigint' || typeof value === 'string'
        ? Number(value)
        : NaN
  if (!Number.isFinite(n)) {
    throw new AceMqError(
      `the idempotency table returned ${String(value)} for ${column}, not a number`,
      {
        code: 'ACEMQ_STORE_RESULT_UNKNOWN',
      },
    )
  }
  return n
}

function toBoolean(value: unknown): boolean {
  if (value === true || value === 1 || value === 1n || value === '1' || value === 't') return true
  if (value === false || value === 0 || value === 0n || value === '0' || value === 'f') return false
  throw new AceMqError(
    `the idempotency table returned ${String(value)} for confirmed, not a boolean`,
    {
      code: 'ACEMQ_STORE_RESULT_UNKNOWN',
    },
  )
}

function warn(error: unknown): void {
  console.warn('acemq: purging expired idempotency rows failed; claims are unaffected', error)
}
