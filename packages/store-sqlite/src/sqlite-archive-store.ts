import type Sqlite from 'better-sqlite3'
import { ConfigurationError, type DeadLetterArchiveStore } from '@acemq/core'
import {
  DEFAULT_ARCHIVE_TABLE,
  type ArchiveAuditEntry,
  type ArchiveFilter,
  type ArchiveMark,
  type ArchivePage,
  type ArchivedMessage,
  ARCHIVE_COLUMNS,
  archiveAuditFromRow,
  archiveCursorAfter,
  archiveRowValues,
  archiveTableStatements,
  archivedMessageFromRow,
  checkArchiveFilter,
  likeContaining,
  parseTableName,
} from '@acemq/core/spi'
import { openDatabase } from './internal/database.js'

/** Options of {@link SqliteArchiveStore}. */
export interface SqliteArchiveStoreOptions {
  /** The messages table (default `acemq_dead_letters`); the audit log is `{table}_audit`. */
  readonly table?: string
}

/**
 * A dead-letter archive in a SQLite file through better-sqlite3: the same tables
 * `@acemq/store-kysely` writes on SQLite. Given a path, the store opens the file (WAL) and
 * creates its tables; given a `Database`, create them with {@link SqliteArchiveStore.createTableSql}.
 *
 * @example
 * ```ts
 * const store = new SqliteArchiveStore('dead-letters.db')
 * const archive = new DeadLetterArchive({ transport: mq.transport, store })
 * ```
 */
export class SqliteArchiveStore implements DeadLetterArchiveStore {
  readonly table: string
  readonly #db: Sqlite.Database
  readonly #owned: boolean
  readonly #messages: string
  readonly #audit: string

  constructor(databaseOrPath: Sqlite.Database | string, options: SqliteArchiveStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    this.table = options.table ?? DEFAULT_ARCHIVE_TABLE
    const [schema, name] = parseTableName(this.table)
    const quote = (part: string): string => `"${part}"`
    this.#messages = schema === undefined ? quote(name) : `${quote(schema)}.${quote(name)}`
    this.#audit =
      schema === undefined ? quote(`${name}_audit`) : `${quote(schema)}.${quote(`${name}_audit`)}`
    const { db, owned } = openDatabase(databaseOrPath, undefined)
    this.#db = db
    this.#owned = owned
    if (owned) db.exec(SqliteArchiveStore.createTableSql({ table: this.table }))
  }

  /** The DDL of the archive's tables, for `db.exec(sql)` in a migration. */
  static createTableSql(options: { readonly table?: string } = {}): string {
    return archiveTableStatements('sqlite', options.table ?? DEFAULT_ARCHIVE_TABLE)
      .map((statement) => `${statement};\n`)
      .join('')
  }

  add(message: ArchivedMessage): Promise<boolean> {
    return this.#run(() => {
      const marks = archiveRowValues(message)
        .map(() => '?')
        .join(', ')
      const result = this.#db
        .prepare(
          `INSERT INTO ${this.#messages} (${ARCHIVE_COLUMNS}) VALUES (${marks}) ON CONFLICT (archive_key) DO NOTHING`,
        )
        .run(...archiveRowValues(message))
      return result.changes === 1
    })
  }

  get(id: string): Promise<ArchivedMessage | undefined> {
    return this.#run(() => {
      const row = this.#db
        .prepare(`SELECT ${ARCHIVE_COLUMNS} FROM ${this.#messages} WHERE id = ?`)
        .get(id) as Record<string, unknown> | undefined
      return row === undefined ? undefined : archivedMessageFromRow(row)
    })
  }

  find(filter: ArchiveFilter): Promise<ArchivePage> {
    return this.#run(() => {
      const f = checkArchiveFilter(filter)
      const where: string[] = ['1 = 1']
      const values: unknown[] = []
      const when = (clause: string, ...args: unknown[]): void => {
        where.push(clause)
        values.push(...args)
      }
      if (f.queue !== undefined) when('queue = ?', f.queue)
      if (f.messageType !== undefined) when('message_type = ?', f.messageType)
      if (f.status !== undefined) when('status = ?', f.status)
      if (f.id !== undefined) when('(id = ? OR message_id = ?)', f.id, f.id)
      if (f.from !== undefined) when('archived_at >= ?', f.from)
      if (f.to !== undefined) when('archived_at < ?', f.to)
      if (f.reason !== undefined) when(`LOWER(reason) LIKE ? ESCAPE '!'`, likeContaining(f.reason))
      if (f.cursor !== undefined) {
        const { archivedAt, id } = f.cursor
        when('(archived_at < ? OR (archived_at = ? AND id < ?))', archivedAt, archivedAt, id)
      }
      const rows = this.#db
        .prepare(
          `SELECT ${ARCHIVE_COLUMNS} FROM ${this.#messages} WHERE ${where.join(' AND ')} ORDER BY archived_at DESC, id DESC LIMIT ?`,
        )
        .all(...values, f.limit + 1) as Record<string, unknown>[]
      const messages = rows.slice(0, f.limit).map(archivedMessageFromRow)
      const last = messages[messages.length - 1]
      return {
        messages,
        next: rows.length > f.limit && last !== undefined ? archiveCursorAfter(last) : undefined,
      }
    })
  }

  mark(ids: readonly string[], mark: ArchiveMark): Promise<number> {
    return this.#run(() => {
      if (ids.length === 0) return 0
      return this.#db
        .prepare(
          `UPDATE ${this.#messages} SET status = ?, status_at = ?, status_by = ?, replayed_to = ? WHERE status = 'archived' AND id IN (${ids.map(() => '?').join(', ')})`,
        )
        .run(mark.status, mark.at, mark.by, mark.replayedTo ?? null, ...ids).changes
    })
  }

  purge(before: number): Promise<number> {
    return this.#run(
      () =>
        this.#db
          .prepare(`DELETE FROM ${this.#messages} WHERE status <> 'archived' AND status_at < ?`)
          .run(before).changes,
    )
  }

  audit(entry: ArchiveAuditEntry): Promise<void> {
    return this.#run(() => {
      this.#db
        .prepare(
          `INSERT INTO ${this.#audit} (id, at, actor, action, count, ids, detail) VALUES (?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          entry.id,
          entry.at,
          entry.actor,
          entry.action,
          entry.count,
          JSON.stringify(entry.ids),
          entry.detail,
        )
    })
  }

  auditLog(options: { readonly limit?: number } = {}): Promise<ArchiveAuditEntry[]> {
    return this.#run(() => {
      const limit = options.limit ?? 100
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new ConfigurationError(
          `limit must be a whole number of at least 1; got ${String(limit)}`,
        )
      }
      const rows = this.#db
        .prepare(
          `SELECT id, at, actor, action, count, ids, detail FROM ${this.#audit} ORDER BY at DESC, id DESC LIMIT ?`,
        )
        .all(limit) as Record<string, unknown>[]
      return rows.map(archiveAuditFromRow)
    })
  }

  /** Closes the file when the store opened it. */
  close(): void {
    if (this.#owned && this.#db.open) this.#db.close()
  }

  /** Runs `work`, its throw as a rejection: the store's methods never throw synchronously. */
  #run<T>(work: () => T): Promise<T> {
    try {
      return Promise.resolve(work())
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
  }
}
