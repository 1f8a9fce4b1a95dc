import { DEFAULT_OUTBOX_TABLE, outboxTableStatements } from '@acemq/core/spi'
import { checkDialect, type IdempotencyDialect } from './idempotency-dialect.js'

/**
 * Options of {@link createOutboxTableSql}.
 *
 * @example
 * ```ts
 * const options: OutboxTableSqlOptions = { table: 'app.outbox', dialect: 'mysql' }
 * ```
 */
export interface OutboxTableSqlOptions {
  /** The table (default `acemq_outbox`), optionally `schema.table`. */
  readonly table?: string
  /** The dialect to write the DDL for (default `postgres`). */
  readonly dialect?: IdempotencyDialect
}

/**
 * The DDL of the outbox table, for your migrations: the library never runs DDL on its own.
 * It is the DDL every SQL outbox store writes (`outboxTableStatements` of `@acemq/core/spi`).
 * Columns: `id` (primary key, the published message's id), `exchange`, `routing_key`,
 * `content_type`, `body` (bytes), `headers` and `envelope` (JSON text), `created_at`
 * (epoch ms), `attempts`, `last_error`, `lease_owner`, `leased_until`, `published_at`,
 * `retired_at` (epoch ms, null until then); an index on the unpublished records by age, and
 * one on `published_at` for purging.
 *
 * @example
 * ```ts
 * console.log(createOutboxTableSql({ dialect: 'postgres' }))
 * ```
 */
export function createOutboxTableSql(options: OutboxTableSqlOptions = {}): string {
  const dialect = checkDialect(options.dialect ?? 'postgres')
  return `${outboxTableStatements(options.table ?? DEFAULT_OUTBOX_TABLE, dialect).join(';\n\n')};\n`
}
