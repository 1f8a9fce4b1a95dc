import { ConfigurationError } from '../errors.js'
import {
  DEFAULT_ARCHIVE_PAGE_SIZE,
  MAX_ARCHIVE_PAGE_SIZE,
  type ArchiveFilter,
  type ArchivedMessage,
} from './archive-store.js'

/** Where a page ends: the last row's time and id, newest first. */
export interface ArchiveCursor {
  readonly archivedAt: number
  readonly id: string
}

/** An archive filter checked, with its page size and cursor read. Internal to the stores. */
export interface CheckedArchiveFilter extends ArchiveFilter {
  readonly limit: number
  readonly cursor: ArchiveCursor | undefined
}

const STATUSES = new Set(['archived', 'replayed', 'discarded'])

/**
 * Checks `filter` as every archive store must: a bad field throws a `ConfigurationError`
 * naming it and its value. Internal to the stores (`@acemq/core/spi`).
 */
export function checkArchiveFilter(filter: ArchiveFilter): CheckedArchiveFilter {
  if (typeof filter !== 'object' || filter === null) {
    throw new ConfigurationError(`filter must be an object; got ${String(filter)}`)
  }
  for (const key of ['queue', 'messageType', 'reason', 'id', 'after'] as const) {
    const value = filter[key]
    if (value !== undefined && typeof value !== 'string') {
      throw new ConfigurationError(`filter.${key} must be text; got ${String(value)}`)
    }
  }
  for (const key of ['from', 'to'] as const) {
    const value = filter[key]
    if (value !== undefined && !Number.isSafeInteger(value)) {
      throw new ConfigurationError(`filter.${key} must be epoch milliseconds; got ${String(value)}`)
    }
  }
  if (filter.status !== undefined && !STATUSES.has(filter.status)) {
    throw new ConfigurationError(
      `filter.status must be archived, replayed or discarded; got ${String(filter.status)}`,
    )
  }
  const limit = filter.limit ?? DEFAULT_ARCHIVE_PAGE_SIZE
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_ARCHIVE_PAGE_SIZE) {
    throw new ConfigurationError(
      `filter.limit must be a whole number from 1 to ${MAX_ARCHIVE_PAGE_SIZE}; got ${String(limit)}`,
    )
  }
  return {
    ...filter,
    limit,
    cursor: filter.after === undefined ? undefined : readCursor(filter.after),
  }
}

/** The `next` of a page whose last row is `last`. */
export function archiveCursorAfter(last: ArchivedMessage): string {
  return Buffer.from(JSON.stringify([last.archivedAt, last.id])).toString('base64url')
}

function readCursor(text: string): ArchiveCursor {
  try {
    const [archivedAt, id] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as [
      unknown,
      unknown,
    ]
    if (Number.isSafeInteger(archivedAt) && typeof id === 'string') {
      return { archivedAt: archivedAt as number, id }
    }
  } catch {
    // Refused below.
  }
  throw new ConfigurationError(`filter.after is no page cursor; got ${JSON.stringify(text)}`)
}

/** `%`, `_` and `!` taken literally in a `LIKE … ESCAPE '!'` pattern, lower-cased. */
export function likeContaining(text: string): string {
  return `%${text.toLowerCase().replace(/[!%_]/g, (c) => `!${c}`)}%`
}
