import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { ArchiveAuditEntry, ArchiveStatus, ArchivedMessage } from './archive-store.js'

/** An archived message as a row's values, in {@link ARCHIVE_COLUMNS}' order. Internal. */
export function archiveRowValues(m: ArchivedMessage): unknown[] {
  return [
    m.id,
    m.key,
    m.queue,
    m.messageId,
    m.messageType,
    m.reason,
    m.attempt,
    m.firstSeen ?? null,
    m.archivedAt,
    m.correlationId,
    m.traceparent ?? null,
    m.exchange,
    m.routingKey,
    // A Buffer: every driver binds one as bytes, not all take a bare Uint8Array.
    Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength),
    m.headers,
    m.properties,
    m.status,
    m.statusAt ?? null,
    m.statusBy ?? null,
    m.replayedTo ?? null,
  ]
}

/** A row of the messages table read back, whatever number and byte types the driver gives. */
export function archivedMessageFromRow(row: Record<string, unknown>): ArchivedMessage {
  return {
    id: text(row, 'id'),
    key: text(row, 'archive_key'),
    queue: text(row, 'queue'),
    messageId: text(row, 'message_id'),
    messageType: text(row, 'message_type'),
    reason: text(row, 'reason'),
    attempt: integer(row, 'attempt'),
    firstSeen: optionalInteger(row, 'first_seen'),
    archivedAt: integer(row, 'archived_at'),
    correlationId: text(row, 'correlation_id'),
    traceparent: optionalText(row, 'traceparent'),
    exchange: text(row, 'exchange'),
    routingKey: text(row, 'routing_key'),
    body: bytes(row, 'body'),
    headers: text(row, 'headers'),
    properties: text(row, 'properties'),
    status: text(row, 'status') as ArchiveStatus,
    statusAt: optionalInteger(row, 'status_at'),
    statusBy: optionalText(row, 'status_by'),
    replayedTo: optionalText(row, 'replayed_to'),
  }
}

/** A row of the audit table read back. */
export function archiveAuditFromRow(row: Record<string, unknown>): ArchiveAuditEntry {
  return {
    id: text(row, 'id'),
    at: integer(row, 'at'),
    actor: text(row, 'actor'),
    action: text(row, 'action'),
    count: integer(row, 'count'),
    ids: JSON.parse(text(row, 'ids')) as string[],
    detail: text(row, 'detail'),
  }
}

function text(row: Record<string, unknown>, column: string): string {
  const value = row[column]
  if (typeof value === 'string') return value
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8')
  throw unreadable(column, value)
}

function optionalText(row: Record<string, unknown>, column: string): string | undefined {
  return row[column] === null || row[column] === undefined ? undefined : text(row, column)
}

function integer(row: Record<string, unknown>, column: string): number {
  const value = row[column]
  const n = typeof value === 'bigint' || typeof value === 'string' ? Number(value) : value
  if (typeof n === 'number' && Number.isSafeInteger(n)) return n
  throw unreadable(column, value)
}

function optionalInteger(row: Record<string, unknown>, column: string): number | undefined {
  return row[column] === null || row[column] === undefined ? undefined : integer(row, column)
}

function bytes(row: Record<string, unknown>, column: string): Uint8Array {
  const value = row[column]
  if (value instanceof Uint8Array) return new Uint8Array(value)
  throw unreadable(column, value)
}

function unreadable(column: string, value: unknown): AceMqError {
  return new AceMqError(
    `the archive's column ${column} held ${value === null ? 'null' : typeof value}, which it never writes`,
    { code: ErrorCodes.STORE_RESULT_UNKNOWN },
  )
}
