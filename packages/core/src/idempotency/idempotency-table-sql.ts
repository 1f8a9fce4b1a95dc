import type { SqlDialect } from '../sql/sql-dialect.js'
import { indexName, quotedTable } from '../sql/sql-names.js'
import { parseTableName } from './store-validation.js'

const INDEX_SUFFIX = '_claimed_at_idx'

/**
 * The statements that create the idempotency table on `dialect`, one by one (SQLite prepares
 * one at a time) — the table every SQL idempotency store claims in: `id` (primary key, compared
 * byte for byte), `owner`, `claimed_at` (epoch ms), `confirmed`, `confirmed_at` (epoch ms, null
 * until confirmed), and an index on `claimed_at` for the purge. For store authors: stores never
 * run it, they hand it to the application's migrations.
 *
 * @example
 * ```ts
 * const ddl = `${idempotencyTableStatements('acemq_idempotency', 'sqlite').join(';\n')};\n`
 * ```
 */
export function idempotencyTableStatements(table: string, dialect: SqlDialect): string[] {
  const [schema, name] = parseTableName(table)
  const index = indexName(name, INDEX_SUFFIX)
  const qualified = quotedTable(schema, name, dialect)
  switch (dialect) {
    case 'postgres': {
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${qualified} (`,
          `  id text PRIMARY KEY,`,
          `  owner text NOT NULL,`,
          `  claimed_at bigint NOT NULL,`,
          `  confirmed boolean NOT NULL DEFAULT false,`,
          `  confirmed_at bigint`,
          `)`,
        ].join('\n'),
        `CREATE INDEX IF NOT EXISTS "${index}" ON ${qualified} (claimed_at)`,
      ]
    }
    case 'sqlite': {
      const prefix = schema === undefined ? '' : `"${schema}".`
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${prefix}"${name}" (`,
          `  id TEXT NOT NULL PRIMARY KEY,`,
          `  owner TEXT NOT NULL,`,
          `  claimed_at INTEGER NOT NULL,`,
          `  confirmed INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1)),`,
          `  confirmed_at INTEGER`,
          `)`,
        ].join('\n'),
        `CREATE INDEX IF NOT EXISTS ${prefix}"${index}" ON "${name}" (claimed_at)`,
      ]
    }
    case 'mysql': {
      return [
        [
          `CREATE TABLE IF NOT EXISTS ${qualified} (`,
          // Bytes, not text: ids compare byte for byte, as they do on Postgres and SQLite. A
          // VARCHAR, even under utf8mb4_bin, pads: 'order-1 ' would collide with 'order-1'
          // and be acked as its duplicate. 255 bytes is the longest id the store accepts.
          `  id VARBINARY(255) NOT NULL PRIMARY KEY,`,
          `  owner VARCHAR(64) NOT NULL,`,
          `  claimed_at BIGINT NOT NULL,`,
          `  confirmed BOOLEAN NOT NULL DEFAULT FALSE,`,
          `  confirmed_at BIGINT NULL,`,
          `  INDEX \`${index}\` (claimed_at)`,
          `) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
        ].join('\n'),
      ]
    }
  }
}
