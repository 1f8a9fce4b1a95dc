import { sql, type QueryExecutor, type RawBuilder } from 'kysely'
import { ConfigurationError, type ClaimCheckStore } from '@acemq/core'
import { assertClaimCheckKey, assertExpiresAt, parseTableName } from '@acemq/core/spi'
import { checkDialect, detectDialect, type IdempotencyDialect } from './idempotency-dialect.js'
import { run } from './internal/prepared.js'
import { queryExecutor } from './internal/executor.js'
import type { KyselyDatabase } from './kysely-database.js'

/** The claim-check table's default name. */
export const DEFAULT_CLAIM_CHECK_TABLE = 'acemq_claim_checks'

/** Options of {@link KyselyClaimCheckStore} and {@link createClaimCheckTableSql}. */
export interface KyselyClaimCheckStoreOptions {
  /** The table (default `acemq_claim_checks`), optionally `schema.table`. */
  readonly table?: string
  /** The dialect (default: told from the Kysely adapter; for the DDL, `postgres`). */
  readonly dialect?: IdempotencyDialect
}

const BLOB: Readonly<Record<IdempotencyDialect, string>> = {
  postgres: 'BYTEA',
  sqlite: 'BLOB',
  // 5 MB bodies and more: a BLOB holds 64 KiB only.
  mysql: 'LONGBLOB',
}

function quoted(table: string, dialect: IdempotencyDialect): string {
  const q = dialect === 'mysql' ? '`' : '"'
  return parseTableName(table, 'table')
    .filter((part): part is string => part !== undefined)
    .map((part) => `${q}${part}${q}`)
    .join('.')
}

/**
 * The DDL of the claim-check table: the key, the body and its expiry (epoch ms, indexed for
 * the purge).
 *
 * @example
 * ```ts
 * await sql.raw(createClaimCheckTableSql({ dialect: 'postgres' })).execute(db)
 * ```
 */
export function createClaimCheckTableSql(options: KyselyClaimCheckStoreOptions = {}): string {
  const dialect = checkDialect(options.dialect ?? 'postgres')
  const table = options.table ?? DEFAULT_CLAIM_CHECK_TABLE
  const name = quoted(table, dialect)
  const index = `${parseTableName(table)[1]}_expires_at`
  return (
    [
      `CREATE TABLE IF NOT EXISTS ${name} (claim_key VARCHAR(200) NOT NULL PRIMARY KEY, body ${BLOB[dialect]} NOT NULL, expires_at BIGINT NOT NULL)`,
      dialect === 'mysql'
        ? `CREATE INDEX ${index} ON ${name} (expires_at)`
        : `CREATE INDEX IF NOT EXISTS ${index} ON ${name} (expires_at)`,
    ].join(';\n') + ';\n'
  )
}

/**
 * A {@link ClaimCheckStore} in a database table through Kysely: Postgres, MySQL / MariaDB or
 * SQLite. Create the table with {@link createClaimCheckTableSql}. A body is removed only by
 * `delete` or once expired, by `purgeExpired` (docs/design.md §26).
 *
 * @example
 * ```ts
 * const store = new KyselyClaimCheckStore(db)
 * const codecs = CodecRegistry.defaults().with(claimCheckCodec({ inner: jsonCodec, store }))
 * ```
 */
export class KyselyClaimCheckStore implements ClaimCheckStore {
  readonly table: string
  readonly dialect: IdempotencyDialect
  /** Without the instance's plugins: they would rewrite the store's own table and columns. */
  readonly #executor: QueryExecutor

  constructor(db: KyselyDatabase, options: KyselyClaimCheckStoreOptions = {}) {
    if (typeof db?.getExecutor !== 'function') {
      throw new ConfigurationError(
        `KyselyClaimCheckStore(db) must be a Kysely instance; got ${String(db)}`,
      )
    }
    this.table = options.table ?? DEFAULT_CLAIM_CHECK_TABLE
    parseTableName(this.table, 'KyselyClaimCheckStore(options.table)')
    this.dialect = options.dialect === undefined ? detectDialect(db) : checkDialect(options.dialect)
    this.#executor = queryExecutor(db).withoutPlugins()
  }

  #run<Row>(query: RawBuilder<Row>): ReturnType<typeof run<Row>> {
    return run<Row>(this.#executor, query.compile({ getExecutor: () => this.#executor }))
  }

  async put(key: string, body: Uint8Array, expiresAt: number): Promise<void> {
    assertClaimCheckKey(key, 'put(key)')
    assertExpiresAt(expiresAt, 'put(expiresAt)')
    if (!(body instanceof Uint8Array)) {
      throw new ConfigurationError(`put(body) must be a Uint8Array; got ${typeof body}`)
    }
    const t = sql.table(this.table)
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.length)
    const upsert =
      this.dialect === 'mysql'
        ? sql`INSERT INTO ${t} (claim_key, body, expires_at) VALUES (${key}, ${bytes}, ${expiresAt}) ON DUPLICATE KEY UPDATE body = VALUES(body), expires_at = VALUES(expires_at)`
        : sql`INSERT INTO ${t} (claim_key, body, expires_at) VALUES (${key}, ${bytes}, ${expiresAt}) ON CONFLICT (claim_key) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at`
    await this.#run(upsert)
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    assertClaimCheckKey(key, 'get(key)')
    const { rows } = await this.#run(
      sql<{ body: Uint8Array }>`SELECT body FROM ${sql.table(this.table)} WHERE claim_key = ${key}`,
    )
    const body = rows[0]?.body
    return body === undefined ? undefined : Buffer.from(body)
  }

  async delete(key: string): Promise<void> {
    assertClaimCheckKey(key, 'delete(key)')
    await this.#run(sql`DELETE FROM ${sql.table(this.table)} WHERE claim_key = ${key}`)
  }

  async purgeExpired(now: number = Date.now()): Promise<number> {
    assertExpiresAt(now, 'purgeExpired(now)')
    const result = await this.#run(
      sql`DELETE FROM ${sql.table(this.table)} WHERE expires_at <= ${now}`,
    )
    return Number(result.numAffectedRows ?? 0n)
  }
}
