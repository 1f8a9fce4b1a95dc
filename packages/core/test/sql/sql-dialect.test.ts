import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '../../src/errors.js'
import { idempotencyTableStatements } from '../../src/idempotency/idempotency-table-sql.js'
import { SQL_DIALECTS, sqlDialect, sqlScript } from '../../src/sql/sql-dialect.js'
import { indexName, quotedTable } from '../../src/sql/sql-names.js'

describe('the SQL dialects', () => {
  it('lists postgres, sqlite and mysql, and cannot be changed', () => {
    expect(SQL_DIALECTS).toEqual(['postgres', 'sqlite', 'mysql'])
    expect(Object.isFrozen(SQL_DIALECTS)).toBe(true)
  })

  it('accepts each dialect as it is', () => {
    for (const dialect of SQL_DIALECTS) expect(sqlDialect(dialect)).toBe(dialect)
  })

  it('refuses any other value, naming the option and the value', () => {
    expect(() => sqlDialect('oracle')).toThrow(ConfigurationError)
    expect(() => sqlDialect('oracle')).toThrow(
      `dialect must be one of 'postgres', 'sqlite', 'mysql'; got "oracle"`,
    )
    expect(() => sqlDialect('Postgres', 'options.dialect')).toThrow(
      /^options\.dialect must be one of .*; got "Postgres"$/,
    )
    expect(() => sqlDialect(undefined)).toThrow(/; got undefined$/)
  })

  it('writes statements as one migration script, each ended by a semicolon', () => {
    expect(sqlScript(['CREATE TABLE a (x int)', 'CREATE INDEX b ON a (x)'])).toBe(
      'CREATE TABLE a (x int);\n\nCREATE INDEX b ON a (x);\n',
    )
    const script = sqlScript(idempotencyTableStatements('acemq_idempotency', 'postgres'))
    expect(script.match(/;\n/g)).toHaveLength(2)
  })
})

describe('the SQL names', () => {
  it('quotes a table for its dialect, with or without a schema', () => {
    expect(quotedTable(undefined, 'seen', 'postgres')).toBe('"seen"')
    expect(quotedTable('app', 'seen', 'sqlite')).toBe('"app"."seen"')
    expect(quotedTable('app', 'seen', 'mysql')).toBe('`app`.`seen`')
  })

  it('cuts an index name so that it stays within 63 characters, suffix kept', () => {
    expect(indexName('outbox', '_pending_idx')).toBe('outbox_pending_idx')
    const long = indexName('t'.repeat(80), '_pending_idx')
    expect(long).toHaveLength(63)
    expect(long.endsWith('_pending_idx')).toBe(true)
  })
})
