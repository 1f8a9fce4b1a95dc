/** Where an archived dead letter stands: kept, sent back, or discarded (a tombstone). */
export type ArchiveStatus = 'archived' | 'replayed' | 'discarded'

/**
 * A dead letter taken off a `.dlq` or `.parked` queue into the archive: every property and
 * header as it travelled (`headers` and `properties` are wire JSON, see `encodeWireJson`), the
 * body's bytes, and the envelope fields an operator filters on.
 */
export interface ArchivedMessage {
  /** The archive's own id for the row. */
  readonly id: string
  /** Tells a redelivery of the same dead letter from a new one: one row per key. */
  readonly key: string
  /** The `.dlq` or `.parked` queue it was taken from. */
  readonly queue: string
  /** The envelope id (`x-acemq-id`, else the message-id). */
  readonly messageId: string
  /** The envelope's type (`x-acemq-type`). */
  readonly messageType: string
  /** Why it was set aside (`x-acemq-error`); empty when it carried none. */
  readonly reason: string
  readonly attempt: number
  /** When the message was first seen by a consumer, epoch ms, when it says. */
  readonly firstSeen: number | undefined
  /** When the archive took it, epoch ms. */
  readonly archivedAt: number
  readonly correlationId: string
  /** The W3C `traceparent` it carried, if any. */
  readonly traceparent: string | undefined
  readonly exchange: string
  readonly routingKey: string
  readonly body: Uint8Array
  /** The headers as they travelled, as wire JSON. */
  readonly headers: string
  /** The basic properties, as wire JSON. */
  readonly properties: string
  readonly status: ArchiveStatus
  /** When its status last changed, epoch ms. */
  readonly statusAt: number | undefined
  /** Who changed it. */
  readonly statusBy: string | undefined
  /** Where a replay sent it. */
  readonly replayedTo: string | undefined
}

/** What to look for in the archive. Every field narrows; none given lists everything. */
export interface ArchiveFilter {
  readonly queue?: string
  readonly messageType?: string
  /** Case-insensitive text the reason contains. */
  readonly reason?: string
  /** The envelope id, or the archive's own id. */
  readonly id?: string
  /** Archived at or after, epoch ms. */
  readonly from?: number
  /** Archived before, epoch ms. */
  readonly to?: number
  readonly status?: ArchiveStatus
  /** Rows per page (default {@link DEFAULT_ARCHIVE_PAGE_SIZE}, at most 500). */
  readonly limit?: number
  /** The `next` of the page before. */
  readonly after?: string
}

/** One page of the archive, newest first. */
export interface ArchivePage {
  readonly messages: readonly ArchivedMessage[]
  /** Give it as `after` for the next page; undefined on the last. */
  readonly next: string | undefined
}

/** A status change, as {@link DeadLetterArchiveStore.mark} writes it. */
export interface ArchiveMark {
  readonly status: 'replayed' | 'discarded'
  readonly at: number
  readonly by: string
  readonly replayedTo?: string
}

/** One operator action, as the audit log keeps it. */
export interface ArchiveAuditEntry {
  readonly id: string
  readonly at: number
  /** Who: the operator's name as the console or the caller gave it. */
  readonly actor: string
  /** `replay`, `edit-and-replay`, `discard`, `purge`. */
  readonly action: string
  /** How many messages it changed. */
  readonly count: number
  /** The archive ids it was asked about. */
  readonly ids: readonly string[]
  /** More: the target queue, what failed. */
  readonly detail: string
}

/** Rows per archive page unless asked otherwise. */
export const DEFAULT_ARCHIVE_PAGE_SIZE = 50

/** The most rows one archive page may hold. */
export const MAX_ARCHIVE_PAGE_SIZE = 500

/** The archive's table unless told otherwise; the audit log is `{table}_audit`. */
export const DEFAULT_ARCHIVE_TABLE = 'acemq_dead_letters'

/**
 * Where a dead-letter archive keeps its messages and its audit log. `@acemq/store-kysely` and
 * `@acemq/store-sqlite` implement it; `archiveStoreConformance` in `@acemq/testing` is the
 * contract.
 */
export interface DeadLetterArchiveStore {
  /**
   * Keeps `message`, committed before it resolves; resolves `false` (and changes nothing) when
   * a row with its `key` is there already — a dead letter redelivered after a crash between
   * the commit and the ack.
   */
  add(message: ArchivedMessage): Promise<boolean>
  /** The message with this archive id, or undefined. */
  get(id: string): Promise<ArchivedMessage | undefined>
  /** A page of messages, newest first. */
  find(filter: ArchiveFilter): Promise<ArchivePage>
  /**
   * Sets the status of those of `ids` still `archived`; resolves how many it changed. A
   * message already replayed or discarded is never changed again.
   */
  mark(ids: readonly string[], mark: ArchiveMark): Promise<number>
  /** Deletes replayed and discarded messages whose status changed before `before`. */
  purge(before: number): Promise<number>
  /** Appends to the audit log. */
  audit(entry: ArchiveAuditEntry): Promise<void>
  /** The audit log, newest first. */
  auditLog(options?: { readonly limit?: number }): Promise<ArchiveAuditEntry[]>
}
