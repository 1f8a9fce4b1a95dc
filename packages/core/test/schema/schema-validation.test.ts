import { describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  ErrorCodes,
  SchemaValidationError,
  withSchema,
} from '../../src/index.js'
import { MAX_ISSUES_REASON_LENGTH, describeIssues } from '../../src/spi.js'

describe('describeIssues', () => {
  it('writes each issue as its path and message, numbers as indexes and path segments by key', () => {
    expect(
      describeIssues([
        { message: 'Required', path: ['items', 0, { key: 'sku' }] },
        { message: 'Expected object' },
      ]),
    ).toBe('items[0].sku: Required; (root): Expected object')
  })

  it('lists ten issues at most and counts the rest', () => {
    const issues = Array.from({ length: 10_000 }, (_, i) => ({ message: 'bad', path: [i] }))
    const text = describeIssues(issues)
    expect(text.split('; ')).toHaveLength(11)
    expect(text.endsWith('… and 9990 more issue(s)')).toBe(true)
  })

  it('never exceeds the bound, however long each message is', () => {
    const issues = Array.from({ length: 50 }, () => ({ message: 'x'.repeat(5_000), path: ['a'] }))
    expect(describeIssues(issues).length).toBeLessThanOrEqual(MAX_ISSUES_REASON_LENGTH)
    expect(new SchemaValidationError(issues).message.length).toBeLessThanOrEqual(
      MAX_ISSUES_REASON_LENGTH + 40,
    )
  })

  it('gives SchemaValidationError the code ACEMQ_INVALID_PAYLOAD and every issue', () => {
    const issues = [{ message: 'bad' }]
    const error = new SchemaValidationError(issues)
    expect(error.code).toBe(ErrorCodes.INVALID_PAYLOAD)
    expect(error.issues).toBe(issues)
  })
})

describe('withSchema', () => {
  it('refuses something that is not a Standard Schema, naming the argument', () => {
    expect(() => withSchema({} as never, () => undefined)).toThrow(ConfigurationError)
    expect(() => withSchema({} as never, () => undefined)).toThrow(/withSchema\(schema\)/)
  })

  it('refuses a handler that is not a function', () => {
    const schema = {
      '~standard': { version: 1 as const, vendor: 't', validate: (value: unknown) => ({ value }) },
    }
    expect(() => withSchema(schema, 'nope' as never)).toThrow(/withSchema\(handler\)/)
  })
})
