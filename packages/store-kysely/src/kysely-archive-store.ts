import { sql, type QueryExecutor, type RawBuilder } from 'kysely'
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
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { isDuplicateKey } from './idempotency-statements.js'
import { queryExecutor } from './internal/executor.js'
import type { KyselyDatabase } from './kysely-database.js'

/** Options of {@link KyselyArchiveStore}. */
export interface KyselyArchiveStoreOptions {
  /** The messages table (default `acemq_dead_letters`); the audit log is `{table}_audit`. */
  readonly table?: string
  /** The SQL to write (default: told from the Kysely adapter). */
  readonly dialect?: IdempotencyDialect
}

/**
 * A dead-letter archive on any Kysely database: Postgres, MySQL / MariaDB and SQLite are
 * tested. The store never runs DDL on its own: create the tables with
 * {@link KyselyArchiveStore.createTableSql} in a migration (or {@link KyselyArchiveStore.createTables}
 * in a test).
 *
 * @example
 * ```ts
 * const store = new KyselyArchiveStore(db)
 * const archive = new DeadLetterArchive({ transport: mq.transport, store })
 * ```
 */
export class KyselyArchiveStore implements DeadLetterArchiveStore {
  /** The messages table. */
  readonly table: string
  /** The SQL this store writes. */
  readonly dialect: IdempotencyDialect
  readonly #db: { getExecutor(): QueryExecutor }
  readonly #messages: RawBuilder<unknown>
  readonly #audit: RawBuilder<unknown>

  constructor(db: KyselyDatabase, options: KyselyArchiveStoreOptions = {}) {
    if (typeof db !== 'object' || db === null || typeof db.getExecutor !== 'function') {
      throw new ConfigurationError(`db must be a Kysely instance; got ${String(db)}`)
    }
    this.table = options.table ?? DEFAULT_ARCHIVE_TABLE
    parseTableName(this.table)
    this.dialect = options.dialect === undefined ? detectDialect(db) : checkDialect(options.dialect)
    // The caller's plugins must not rewrite the store's SQL or the column names it reads back.
    const executor = queryExecutor(db).withoutPlugins()
    this.#db = { getExecutor: () => executor }
    this.#messages = sql.table(this.table)
    this.#audit = sql.table(`${this.table}_audit`)
  }

  /** The DDL of this store's tables in its dialect, for your migrations. */
  createTableSql(): string[] {
    return archiveTableStatements(this.dialect, this.table)
  }

  /** Runs {@link KyselyArchiveStore.createTableSql}: for tests and local tools. */
  async createTables(): Promise<void> {
    for (const statement of this.createTableSql()) await sql.raw(statement).execute(this.#db)
  }

  async add(message: ArchivedMessage): Promise<boolean> {
    const values = sql.join(archiveRowValues(message).map((v) => sql.val(v)))
    const insert = sql`INSERT INTO ${this.#messages} (${sql.raw(ARCHIVE_COLUMNS)}) VALUES (${values})`
    if (this.dialect === 'mysql') {
      try {
        await insert.execute(this.#db)
        return true
      } catch (error) {
        // Only a duplicate key means "kept already"; any other failure is a failure.
        if (isDuplicateKey(error)) return false
        throw error
      }
    }
    const result = await sql`${insert} ON CONFLICT (archive_key) DO NOTHING`.execute(this.#db)
    return Number(result.numAffectedRows ?? -1n) === 1
  }

  async get(id: string): Promise<ArchivedMessage | undefined> {
    const { rows } = await sql<
      Record<string, unknown>
    >`SELECT ${sql.raw(ARCHIVE_COLUMNS)} FROM ${this.#messages} WHERE id = ${id}`.execute(this.#db)
    return rows[0] === undefined ? undefined : archivedMessageFromRow(rows[0])
  }

  async find(filter: ArchiveFilter): Promise<ArchivePage> {
    const f = checkArchiveFilter(filter)
    const where: RawBuilder<unknown>[] = [sql`1 = 1`]
    if (f.queue !== undefined) where.push(sql`queue = ${f.queue}`)
    if (f.messageType !== undefined) where.push(sql`message_type = ${f.messageType}`)
    if (f.status !== undefined) where.push(sql`status = ${f.status}`)
    if (f.id !== undefined) where.push(sql`(id = ${f.id} OR message_id = ${f.id})`)
    if (f.from !== undefined) where.push(sql`archived_at >= ${f.from}`)
    if (f.to !== undefined) where.push(sql`archived_at < ${f.to}`)
    if (f.reason !== undefined) {
      where.push(sql`LOWER(reason) LIKE ${likeContaining(f.reason)} ESCAPE '!'`)
    }
    if (f.cursor !== undefined) {
      const { archivedAt, id } = f.cursor
      where.push(sql`(archived_at < ${archivedAt} OR (archived_at = ${archivedAt} AND id < ${id}))`)
    }
    const { rows } = await sql<
      Record<string, unknown>
    >`SELECT ${sql.raw(ARCHIVE_COLUMNS)} FROM ${this.#messages} WHERE ${sql.join(where, sql` AND `)} ORDER BY archived_at DESC, id DESC LIMIT ${f.limit + 1}`.execute(
      this.#db,
    )
    const messages = rows.slice(0, f.limit).map(archivedMessageFromRow)
    const last = messages[messages.length - 1]
    return {
      messages,
      next: rows.length > f.limit && last !== undefined ? archiveCursorAfter(last) : undefined,
    }
  }

  async mark(ids: readonly string[], mark: ArchiveMark): Promise<number> {
    if (ids.length === 0) return 0
    const result =
      await sql`UPDATE ${this.#messages} SET status = ${mark.status}, status_at = ${mark.at}, status_by = ${mark.by}, replayed_to = ${mark.replayedTo ?? null} WHERE status = 'archived' AND id IN (${sql.join(ids.map((id) => sql.val(id)))})`.execute(
        this.#db,
      )
    return Number(result.numAffectedRows ?? 0n)
  }

  async purge(before: number): Promise<number> {
    const result =
      await sql`DELETE FROM ${this.#messages} WHERE status <> 'archived' AND status_at < ${before}`.execute(
        this.#db,
      )
    return Number(result.numAffectedRows ?? 0n)
  }

  async audit(entry: ArchiveAuditEntry): Promise<void> {
    await sql`INSERT INTO ${this.#audit} (id, at, actor, action, count, ids, detail) VALUES (${entry.id}, ${entry.at}, ${entry.actor}, ${entry.action}, ${entry.count}, ${JSON.stringify(entry.ids)}, ${entry.detail})`.execute(
      this.#db,
    )
  }

  async auditLog(options: { readonly limit?: number } = {}): Promise<ArchiveAuditEntry[]> {
    const limit = options.limit ?? 100
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new ConfigurationError(
        `limit must be a whole number of at least 1; got ${String(limit)}`,
      )
    }
    const { rows } = await sql<
      Record<string, unknown>
    >`SELECT id, at, actor, action, count, ids, detail FROM ${this.#audit} ORDER BY at DESC, id DESC LIMIT ${limit}`.execute(
      this.#db,
    )
    return rows.map(archiveAuditFromRow)
  }
}
