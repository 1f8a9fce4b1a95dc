import { AceMqError, ConfigurationError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { columnNumber } from '../sql/sql-values.js'
import type { OutboxEnvelope, OutboxHeaderValue, OutboxRecord } from './outbox-record.js'

/** Publishes a record may fail before it is retired and offered no more (10). */
export const DEFAULT_OUTBOX_MAX_ATTEMPTS = 10

/** The table the SQL outbox stores use unless told otherwise. */
export const DEFAULT_OUTBOX_TABLE = 'acemq_outbox'

/**
 * A record as a store hands it to the relay: what was added, when, and how often its
 * publish has failed.
 */
export interface StoredOutboxRecord {
  readonly id: string
  readonly exchange: string
  readonly routingKey: string
  readonly body: Uint8Array
  readonly contentType: string
  readonly headers: Readonly<Record<string, OutboxHeaderValue>>
  readonly envelope: OutboxEnvelope
  /** When it was added, epoch milliseconds (the store's clock). */
  readonly createdAt: number
  /** Failed publishes so far. */
  readonly attempts: number
  /** Why the last publish failed, if one did. */
  readonly lastError: string | undefined
  /**
   * The lease token of the claim that handed the record out (every record of one claim shares
   * it): `renew`, `release` and `markFailed` act only while the record is still leased under
   * it. Absent on records not handed out by a claim (`retired()`).
   */
  readonly lease?: string | undefined
}

/** A record that failed `maxAttempts` times: kept, listed, never offered again. */
export interface RetiredOutboxRecord extends StoredOutboxRecord {
  /** When it was retired, epoch milliseconds. */
  readonly retiredAt: number
}

/** What the outbox holds now, in one look. */
export interface OutboxStats {
  /** Records waiting to be published (leased ones included). */
  readonly pending: number
  /** Records retired after `maxAttempts` failed publishes. */
  readonly retired: number
  /** When the oldest pending record was added (epoch ms), if any is pending. */
  readonly oldestPendingAt: number | undefined
  /** The store's clock at the look (epoch ms): a lag is `now - oldestPendingAt`. */
  readonly now: number
}

/**
 * What {@link OutboxStore.markFailed} did with the record: `pending` (offered again once its
 * back-off has passed), `retired`, or `lapsed` — the caller's lease had run out and another
 * relay had claimed the record (or it was published or retired meanwhile): nothing changed.
 */
export type OutboxFailure = 'pending' | 'retired' | 'lapsed'

/**
 * What a failed publish is charged with, for {@link OutboxStore.markFailed}.
 *
 * @example
 * ```ts
 * await store.markFailed(record.id, 'NOT_FOUND', { lease: record.lease, retryInMs: 5_000 })
 * ```
 */
export interface OutboxFailOptions {
  /** Failures at which the record is retired (default: the store's own `maxAttempts`). */
  readonly maxAttempts?: number
  /** The claim's lease token: the failure counts only while the record is still leased under it. */
  readonly lease?: string | undefined
  /** How long the record is held back before it is offered again, ms (default 0). */
  readonly retryInMs?: number
}

/**
 * Where the transactional outbox keeps its records, as the relay sees it. Each store also
 * has its own `add(trx, record)`, which writes in the caller's transaction (a Kysely
 * transaction, a better-sqlite3 transaction), so the record exists exactly when the
 * business rows do.
 *
 * - `claimBatch` leases up to `batch` pending records for `leaseMs` with a conditional
 *   update under a new lease token (each record's `lease`): a record leased by one relay is
 *   not offered to another until its lease runs out (or it is released or marked), so two
 *   relays never publish one record at once. Oldest first; a record held back after a failure
 *   is not offered before its time.
 * - `renew` extends the lease of the records still leased under the token, and says how many.
 * - `markPublished` records the broker's confirm: the record is never offered again. It is a
 *   fact, so it is recorded whoever holds the lease now.
 * - `markFailed` counts a failed publish with its reason, ends the lease and holds the record
 *   back `retryInMs`; at `maxAttempts` failures (the option, else the store's own) the record
 *   is retired (kept, listed by `retired`, never offered). Given a lease token, it acts only
 *   while the record is leased under it (a holder whose lease lapsed changes nothing).
 * - `release` ends the lease without counting a failure (the connection was down: the
 *   record was not at fault); given a lease token, only while the record is leased under it.
 * - `reoffer` puts retired records back: pending, with no attempts counted, offered at once.
 *
 * @example
 * ```ts
 * const records = await store.claimBatch(100, 30_000)
 * ```
 */
export interface OutboxStore {
  claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]>
  renew(ids: string | readonly string[], lease: string, leaseMs: number): Promise<number>
  markPublished(ids: string | readonly string[]): Promise<void>
  /** The third argument may also be `maxAttempts` alone, as before `OutboxFailOptions`. */
  markFailed(
    id: string,
    reason: string,
    options?: number | OutboxFailOptions,
  ): Promise<OutboxFailure>
  release(ids: string | readonly string[], lease?: string | undefined): Promise<void>
  pendingCount(): Promise<number>
  retired(limit?: number): Promise<readonly RetiredOutboxRecord[]>
  /** Puts the retired records named (all of them when none is named) back; says how many. */
  reoffer(ids?: string | readonly string[]): Promise<number>
  stats(): Promise<OutboxStats>
}

/** The longest failure reason a store keeps (longer ones are cut). */
export const MAX_OUTBOX_REASON_LENGTH = 1_000

/**
 * Checks `claimBatch`'s arguments. For store authors.
 *
 * @example
 * ```ts
 * async claimBatch(batch: number, leaseMs: number) { assertClaimBatch(batch, leaseMs); ... }
 * ```
 */
export function assertClaimBatch(batch: unknown, leaseMs: unknown): void {
  if (typeof batch !== 'number' || !Number.isSafeInteger(batch) || batch < 1 || batch > 10_000) {
    throw new ConfigurationError(
      `claimBatch(batch) must be a whole number from 1 to 10000; got ${String(batch)}`,
    )
  }
  if (typeof leaseMs !== 'number' || !Number.isSafeInteger(leaseMs) || leaseMs < 1) {
    throw new ConfigurationError(
      `claimBatch(leaseMs) must be a whole number of milliseconds above 0; got ${String(leaseMs)}`,
    )
  }
}

/**
 * The `maxAttempts` of a `markFailed` call: the one given, else the store's. For store authors.
 *
 * @example
 * ```ts
 * const limit = outboxMaxAttempts(maxAttempts, this.maxAttempts)
 * ```
 */
export function outboxMaxAttempts(given: unknown, own: number): number {
  if (given === undefined) return own
  if (typeof given !== 'number' || !Number.isSafeInteger(given) || given < 1) {
    throw new ConfigurationError(
      `markFailed(maxAttempts) must be a whole number of at least 1; got ${String(given)}`,
    )
  }
  return given
}

/**
 * A `markFailed` call's third argument, checked, with the store's `maxAttempts` filled in. For
 * store authors.
 *
 * @example
 * ```ts
 * const { maxAttempts, lease, retryInMs } = outboxFailOptions(options, this.maxAttempts)
 * ```
 */
export function outboxFailOptions(
  options: unknown,
  own: number,
): {
  readonly maxAttempts: number
  readonly lease: string | undefined
  readonly retryInMs: number
} {
  if (options === undefined || typeof options === 'number') {
    return { maxAttempts: outboxMaxAttempts(options, own), lease: undefined, retryInMs: 0 }
  }
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(
      `markFailed(options) must be { maxAttempts?, lease?, retryInMs? } or a number; got ${String(options)}`,
    )
  }
  const { maxAttempts, lease, retryInMs } = options as OutboxFailOptions
  if (lease !== undefined) outboxLease(lease, 'markFailed(options.lease)')
  const delay = retryInMs ?? 0
  if (typeof delay !== 'number' || !Number.isSafeInteger(delay) || delay < 0) {
    throw new ConfigurationError(
      `markFailed(options.retryInMs) must be a whole number of milliseconds, 0 or more; got ${String(delay)}`,
    )
  }
  return { maxAttempts: outboxMaxAttempts(maxAttempts, own), lease, retryInMs: delay }
}

/**
 * Checks a lease token (`renew`, `release`, `markFailed`). For store authors.
 *
 * @example
 * ```ts
 * outboxLease(lease, 'renew(lease)')
 * ```
 */
export function outboxLease(lease: unknown, argument: string): string {
  if (typeof lease !== 'string' || lease === '' || lease.length > 64) {
    throw new ConfigurationError(
      `${argument} must be the lease token of a claim (a record's lease); got ${JSON.stringify(lease)}`,
    )
  }
  return lease
}

/**
 * Whether a database error says the table (or its schema) does not exist: Postgres `42P01` and
 * `3F000`, MySQL / MariaDB 1146 and 1049, SQLite's `no such table`. For store authors.
 *
 * @example
 * ```ts
 * if (isMissingTableError(error)) throw outboxTableMissing(table, error)
 * ```
 */
export function isMissingTableError(error: unknown): boolean {
  const { code, errno, message } = (error ?? {}) as {
    code?: unknown
    errno?: unknown
    message?: unknown
  }
  return (
    code === '42P01' ||
    code === '3F000' ||
    code === 'ER_NO_SUCH_TABLE' ||
    errno === 1146 ||
    code === 'ER_BAD_DB_ERROR' ||
    errno === 1049 ||
    (typeof message === 'string' && /no such table/i.test(message))
  )
}

/**
 * A database error as an outbox store reports it: a missing table as
 * `ACEMQ_STORE_TABLE_MISSING` with the way to create it, anything else as it is. For store
 * authors.
 *
 * @example
 * ```ts
 * try { ... } catch (error) { throw outboxTableTrouble(error, this.table) }
 * ```
 */
export function outboxTableTrouble(error: unknown, table: string): unknown {
  if (!isMissingTableError(error)) return error
  return new AceMqError(
    `the outbox table ${table} does not exist: create it in a migration, with outboxMigration() or store.createTableSql()`,
    { code: ErrorCodes.STORE_TABLE_MISSING, cause: error },
  )
}

/**
 * Checks `renew`'s arguments and returns the ids. For store authors.
 *
 * @example
 * ```ts
 * const list = assertRenew(ids, lease, leaseMs)
 * ```
 */
export function assertRenew(
  ids: string | readonly string[],
  lease: unknown,
  leaseMs: unknown,
): readonly string[] {
  outboxLease(lease, 'renew(lease)')
  if (typeof leaseMs !== 'number' || !Number.isSafeInteger(leaseMs) || leaseMs < 1) {
    throw new ConfigurationError(
      `renew(leaseMs) must be a whole number of milliseconds above 0; got ${String(leaseMs)}`,
    )
  }
  return outboxIds(ids)
}

/**
 * The ids of a `markPublished` or `release` call as a list. For store authors.
 *
 * @example
 * ```ts
 * for (const id of outboxIds(ids)) ...
 * ```
 */
export function outboxIds(ids: string | readonly string[]): readonly string[] {
  const list = typeof ids === 'string' ? [ids] : ids
  if (!Array.isArray(list) || list.some((id) => typeof id !== 'string' || id === '')) {
    throw new ConfigurationError(
      `ids must be a record id or a list of them; got ${JSON.stringify(ids)}`,
    )
  }
  return list
}

/**
 * A failure reason as stored: text, at most {@link MAX_OUTBOX_REASON_LENGTH} characters.
 *
 * @example
 * ```ts
 * const reason = outboxReason(error.message)
 * ```
 */
export function outboxReason(reason: unknown): string {
  const text = typeof reason === 'string' && reason !== '' ? reason : 'publish failed'
  return text.length > MAX_OUTBOX_REASON_LENGTH
    ? `${text.slice(0, MAX_OUTBOX_REASON_LENGTH - 1)}…`
    : text
}

/**
 * A record's headers and envelope fields as the two JSON texts the SQL stores keep in their
 * `headers` and `envelope` columns. For store authors.
 *
 * @example
 * ```ts
 * const { headers, envelope } = outboxColumns(record)
 * ```
 */
export function outboxColumns(record: OutboxRecord): {
  readonly headers: string
  readonly envelope: string
} {
  return { headers: JSON.stringify(record.headers), envelope: JSON.stringify(record.envelope) }
}

/**
 * The columns of an outbox row that {@link outboxRecordFromRow} reads, as the SQL stores select
 * them (a comma-separated list). For store authors.
 *
 * @example
 * ```ts
 * db.prepare(`select ${OUTBOX_ROW_COLUMNS} from acemq_outbox where id = ?`)
 * ```
 */
export const OUTBOX_ROW_COLUMNS =
  'id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts, last_error, lease_owner'

/** One row of an SQL outbox table as a driver returns it. */
export interface OutboxRow {
  readonly id: unknown
  readonly exchange: unknown
  readonly routing_key: unknown
  readonly content_type: unknown
  readonly body: unknown
  readonly headers: unknown
  readonly envelope: unknown
  readonly created_at: unknown
  readonly attempts: unknown
  readonly last_error: unknown
  readonly retired_at?: unknown
  readonly lease_owner?: unknown
}

/**
 * Reads a row of an SQL outbox table back into a record, whatever the driver made of each
 * column (bigint or string numbers, Buffers for bytes and binary text). For store authors.
 *
 * @example
 * ```ts
 * const records = rows.map(outboxRecordFromRow)
 * ```
 */
export function outboxRecordFromRow(row: OutboxRow): StoredOutboxRecord {
  const lastError =
    row.last_error === null || row.last_error === undefined ? undefined : text(row.last_error)
  const lease =
    row.lease_owner === null || row.lease_owner === undefined ? undefined : text(row.lease_owner)
  return Object.freeze({
    ...(lease === undefined ? {} : { lease }),
    id: text(row.id),
    exchange: text(row.exchange),
    routingKey: text(row.routing_key),
    contentType: text(row.content_type),
    body: bytes(row.body),
    headers: Object.freeze(json(row.headers, 'headers') as Record<string, OutboxHeaderValue>),
    envelope: Object.freeze(json(row.envelope, 'envelope') as OutboxEnvelope),
    createdAt: integer(row.created_at, 'created_at'),
    attempts: integer(row.attempts, 'attempts'),
    lastError,
  })
}

/**
 * The rows of a claim read back into records, oldest first (then by id): `RETURNING` gives no
 * order. For store authors.
 *
 * @example
 * ```ts
 * return outboxRecordsOldestFirst(claimed.rows)
 * ```
 */
export function outboxRecordsOldestFirst(rows: readonly OutboxRow[]): StoredOutboxRecord[] {
  return rows
    .map((row) => outboxRecordFromRow(row))
    .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/**
 * {@link outboxRecordFromRow} for a retired row, with its `retired_at`. For store authors.
 *
 * @example
 * ```ts
 * const retired = rows.map(retiredOutboxRecordFromRow)
 * ```
 */
export function retiredOutboxRecordFromRow(row: OutboxRow): RetiredOutboxRecord {
  return Object.freeze({
    ...outboxRecordFromRow({ ...row, lease_owner: undefined }),
    retiredAt: integer(row.retired_at, 'retired_at'),
  })
}

function text(value: unknown): string {
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  return String(value)
}

function bytes(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value
  if (typeof value === 'string') return Buffer.from(value, 'utf8')
  throw new AceMqError(`the outbox table returned a body that is not bytes: ${typeof value}`, {
    code: ErrorCodes.STORE_RESULT_UNKNOWN,
  })
}

function json(value: unknown, column: string): unknown {
  try {
    const parsed: unknown = JSON.parse(text(value))
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed
  } catch {
    // Reported below.
  }
  throw new AceMqError(`the outbox table returned ${column} that are not a JSON object`, {
    code: ErrorCodes.STORE_RESULT_UNKNOWN,
  })
}

function integer(value: unknown, column: string): number {
  return columnNumber(value, 'the outbox table', column, true)
}
