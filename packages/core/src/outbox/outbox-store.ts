import { AceMqError, ConfigurationError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
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

/** What {@link OutboxStore.markFailed} did with the record. */
export type OutboxFailure = 'pending' | 'retired'

/**
 * Where the transactional outbox keeps its records, as the relay sees it. Each store also
 * has its own `add(trx, record)`, which writes in the caller's transaction (a Kysely
 * transaction, a better-sqlite3 transaction), so the record exists exactly when the
 * business rows do.
 *
 * - `claimBatch` leases up to `batch` pending records for `leaseMs` with a conditional
 *   update: a record leased by one relay is not offered to another until its lease runs out
 *   (or it is released or marked), so two relays never publish one record at once. Oldest
 *   first.
 * - `markPublished` records the broker's confirm: the record is never offered again.
 * - `markFailed` counts a failed publish with its reason and ends the lease; at `maxAttempts`
 *   failures (the argument, else the store's own) the record is retired (kept, listed by
 *   `retired`, never offered).
 * - `release` ends the lease without counting a failure (the connection was down: the
 *   record was not at fault).
 *
 * @example
 * ```ts
 * const records = await store.claimBatch(100, 30_000)
 * ```
 */
export interface OutboxStore {
  claimBatch(batch: number, leaseMs: number): Promise<readonly StoredOutboxRecord[]>
  markPublished(ids: string | readonly string[]): Promise<void>
  markFailed(id: string, reason: string, maxAttempts?: number): Promise<OutboxFailure>
  release(ids: string | readonly string[]): Promise<void>
  pendingCount(): Promise<number>
  retired(limit?: number): Promise<readonly RetiredOutboxRecord[]>
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
  return Object.freeze({
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
 * {@link outboxRecordFromRow} for a retired row, with its `retired_at`. For store authors.
 *
 * @example
 * ```ts
 * const retired = rows.map(retiredOutboxRecordFromRow)
 * ```
 */
export function retiredOutboxRecordFromRow(row: OutboxRow): RetiredOutboxRecord {
  return Object.freeze({
    ...outboxRecordFromRow(row),
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
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'bigint' || typeof value === 'string'
        ? Number(value)
        : NaN
  if (!Number.isSafeInteger(n)) {
    throw new AceMqError(
      `the outbox table returned ${String(value)} for ${column}, not a whole number`,
      {
        code: ErrorCodes.STORE_RESULT_UNKNOWN,
      },
    )
  }
  return n
}
