import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '../../src/index.js'
import {
  DEFAULT_IDEMPOTENCY_TABLE,
  functionOption,
  idempotencyTableStatements,
} from '../../src/spi.js'

// The idempotency table is a contract: every SQL store claims in it, and applications create it
// from these statements in their migrations. Pinned whole, per dialect.
describe('idempotencyTableStatements', () => {
  it('creates the Postgres table and its claimed_at index', () => {
    expect(idempotencyTableStatements('acemq_idempotency', 'postgres')).toEqual([
      [
        'CREATE TABLE IF NOT EXISTS "acemq_idempotency" (',
        '  id text PRIMARY KEY,',
        '  owner text NOT NULL,',
        '  claimed_at bigint NOT NULL,',
        '  confirmed boolean NOT NULL DEFAULT false,',
        '  confirmed_at bigint',
        ')',
      ].join('\n'),
      'CREATE INDEX IF NOT EXISTS "acemq_idempotency_claimed_at_idx" ON "acemq_idempotency" (claimed_at)',
    ])
  })

  it('qualifies a Postgres table with its schema, the index in the same schema', () => {
    const [table, index] = idempotencyTableStatements('billing.claims', 'postgres')
    expect(table?.split('\n')[0]).toBe('CREATE TABLE IF NOT EXISTS "billing"."claims" (')
    expect(index).toBe(
      'CREATE INDEX IF NOT EXISTS "claims_claimed_at_idx" ON "billing"."claims" (claimed_at)',
    )
  })

  it('creates the SQLite table, its confirmed flag checked to 0 or 1', () => {
    expect(idempotencyTableStatements('acemq_idempotency', 'sqlite')).toEqual([
      [
        'CREATE TABLE IF NOT EXISTS "acemq_idempotency" (',
        '  id TEXT NOT NULL PRIMARY KEY,',
        '  owner TEXT NOT NULL,',
        '  claimed_at INTEGER NOT NULL,',
        '  confirmed INTEGER NOT NULL DEFAULT 0 CHECK (confirmed IN (0, 1)),',
        '  confirmed_at INTEGER',
        ')',
      ].join('\n'),
      'CREATE INDEX IF NOT EXISTS "acemq_idempotency_claimed_at_idx" ON "acemq_idempotency" (claimed_at)',
    ])
  })

  it('puts an SQLite table of an attached database, and its index, in that database', () => {
    const [table, index] = idempotencyTableStatements('aux.claims', 'sqlite')
    expect(table?.split('\n')[0]).toBe('CREATE TABLE IF NOT EXISTS "aux"."claims" (')
    expect(index).toBe(
      'CREATE INDEX IF NOT EXISTS "aux"."claims_claimed_at_idx" ON "claims" (claimed_at)',
    )
  })

  it('creates the MySQL table in one statement, ids as bytes so they compare byte for byte', () => {
    expect(idempotencyTableStatements('acemq_idempotency', 'mysql')).toEqual([
      [
        'CREATE TABLE IF NOT EXISTS `acemq_idempotency` (',
        '  id VARBINARY(255) NOT NULL PRIMARY KEY,',
        '  owner VARCHAR(64) NOT NULL,',
        '  claimed_at BIGINT NOT NULL,',
        '  confirmed BOOLEAN NOT NULL DEFAULT FALSE,',
        '  confirmed_at BIGINT NULL,',
        '  INDEX `acemq_idempotency_claimed_at_idx` (claimed_at)',
        ') CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
      ].join('\n'),
    ])
  })

  it('qualifies a MySQL table with its database', () => {
    const [table] = idempotencyTableStatements('shop.claims', 'mysql')
    expect(table?.split('\n')[0]).toBe('CREATE TABLE IF NOT EXISTS `shop`.`claims` (')
  })

  it('keeps the index name of a 63-character table within the 63 characters Postgres allows', () => {
    const name = 'a'.repeat(63)
    const [, index] = idempotencyTableStatements(name, 'postgres')
    const indexName = /INDEX IF NOT EXISTS "([^"]+)"/.exec(index ?? '')?.[1]
    expect(indexName).toBe(`${'a'.repeat(48)}_claimed_at_idx`)
    expect(indexName).toHaveLength(63)
  })

  it('refuses a table name that is not a plain identifier', () => {
    expect(() => idempotencyTableStatements('drop table x;', 'postgres')).toThrow(
      ConfigurationError,
    )
  })
})

describe('DEFAULT_IDEMPOTENCY_TABLE', () => {
  it('is the family’s table name', () => {
    expect(DEFAULT_IDEMPOTENCY_TABLE).toBe('acemq_idempotency')
  })
})

describe('functionOption', () => {
  it('returns a function unchanged', () => {
    const now = (): number => 1
    expect(functionOption(now, 'now')).toBe(now)
  })

  it('refuses anything else, naming the option and the value', () => {
    expect(() => functionOption(42, 'now')).toThrow(
      new ConfigurationError('now must be a function; got 42'),
    )
    expect(() => functionOption(undefined, 'onError')).toThrow(
      /^onError must be a function; got undefined$/,
    )
  })
})
