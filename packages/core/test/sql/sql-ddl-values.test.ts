import { describe, expect, it } from 'vitest'
import { ErrorCodes } from '../../src/error-codes.js'
import { columnNumber } from '../../src/spi.js'
import { ID_COLUMN, tableStatements, type TableDefinition } from '../../src/sql/sql-ddl.js'

// The SQL stores' shared pieces (docs/design.md §7): what a column's number reads back as, and
// the statements that create a table from its column and index lists.
describe('columnNumber', () => {
  it('reads a number, a bigint or a numeric string as the number it is', () => {
    expect(columnNumber(42, 't', 'c')).toBe(42)
    expect(columnNumber(1.5, 't', 'c')).toBe(1.5)
    expect(columnNumber(7n, 't', 'c', true)).toBe(7)
    expect(columnNumber('1733356800000', 't', 'c', true)).toBe(1_733_356_800_000)
    expect(columnNumber('2.25', 't', 'c')).toBe(2.25)
  })

  it('refuses a fraction, an unsafe integer or no number at all when a whole one is asked for', () => {
    for (const value of [1.5, '2.25', 2 ** 53, '9007199254740993', NaN]) {
      expect(() => columnNumber(value, 'the outbox table', 'attempts', true)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.STORE_RESULT_UNKNOWN,
          message: `the outbox table returned ${String(value)} for attempts, not a whole number`,
        }),
      )
    }
  })

  it('refuses what is no finite number, naming the table, the column and the value', () => {
    for (const value of ['abc', null, undefined, {}, true, Infinity, '', ' ']) {
      expect(() => columnNumber(value, 'the archive table', 'size', false)).toThrow(
        expect.objectContaining({
          code: ErrorCodes.STORE_RESULT_UNKNOWN,
          message: `the archive table returned ${String(value)} for size, not a number`,
        }),
      )
    }
    // An empty or blank string is no number, though Number('') is 0.
  })
})

const TABLE: TableDefinition = {
  columns: [ID_COLUMN, ['at', 'bigint NOT NULL', 'INTEGER NOT NULL', 'BIGINT NOT NULL']],
  indexes: [
    ['t_at_idx', 'at'],
    ['t_pending_idx', 'at, id', 'at > 0'],
  ],
  mysqlIndexes: [['t_at_idx', 'at']],
}

describe('tableStatements', () => {
  it('writes each Postgres index after the table, with its condition only where it has one', () => {
    expect(tableStatements('app', 't', 'postgres', TABLE)).toEqual([
      'CREATE TABLE IF NOT EXISTS "app"."t" (\n  id text PRIMARY KEY,\n  at bigint NOT NULL\n)',
      'CREATE INDEX IF NOT EXISTS "t_at_idx" ON "app"."t" (at)',
      'CREATE INDEX IF NOT EXISTS "t_pending_idx" ON "app"."t" (at, id) WHERE at > 0',
    ])
  })

  it('names the schema on a SQLite index and the table alone after ON', () => {
    expect(tableStatements('aux', 't', 'sqlite', TABLE).slice(1)).toEqual([
      'CREATE INDEX IF NOT EXISTS "aux"."t_at_idx" ON "t" (at)',
      'CREATE INDEX IF NOT EXISTS "aux"."t_pending_idx" ON "t" (at, id) WHERE at > 0',
    ])
    expect(tableStatements(undefined, 't', 'sqlite', TABLE)[1]).toBe(
      'CREATE INDEX IF NOT EXISTS "t_at_idx" ON "t" (at)',
    )
  })

  it('declares the MySQL indexes inside the table, byte-compared', () => {
    expect(tableStatements(undefined, 't', 'mysql', TABLE)).toEqual([
      'CREATE TABLE IF NOT EXISTS `t` (\n  id VARBINARY(255) NOT NULL PRIMARY KEY,\n  at BIGINT NOT NULL,\n  INDEX `t_at_idx` (at)\n) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
    ])
  })
})
