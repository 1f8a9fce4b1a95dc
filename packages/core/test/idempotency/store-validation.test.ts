import { describe, expect, it } from 'vitest'
import { InMemoryIdempotencyStore, type IdempotencyStore } from '../../src/index.js'
import {
  assertIdempotencyKey,
  assertOwnerToken,
  isClaimingStore,
  parseTableName,
} from '../../src/spi.js'

/** The whole message of what `call` throws (toThrow would accept a part of it). */
function messageOf(call: () => unknown): string {
  try {
    call()
  } catch (error) {
    return (error as Error).message
  }
  throw new Error('it did not throw')
}

// The checks every store shares, in the words a store author's caller sees (found by mutation
// testing, docs/mutation.md).

describe('parseTableName', () => {
  it.each([
    ['acemq_idempotency', [undefined, 'acemq_idempotency']],
    ['audit.acemq_idempotency', ['audit', 'acemq_idempotency']],
    ['_x', [undefined, '_x']],
    ['a'.repeat(63), [undefined, 'a'.repeat(63)]],
    [`${'s'.repeat(63)}.${'t'.repeat(63)}`, ['s'.repeat(63), 't'.repeat(63)]],
  ])('splits %s', (table, expected) => {
    expect(parseTableName(table)).toStrictEqual(expected)
  })

  it.each([
    'x; drop table y',
    '1abc',
    'a'.repeat(64),
    'a.b.c',
    '.a',
    'a.',
    'a.1b',
    `a.${'b'.repeat(64)}`,
    'ok.bad-name',
    'bad-name.ok',
    ' spaced',
    'spaced ',
  ])('refuses %j, naming the argument and the value', (table) => {
    expect(() => parseTableName(table)).toThrow(
      `table must be an SQL identifier (letters, digits and _, at most 63, not starting with a digit), optionally schema-qualified as 'schema.table'; got ${JSON.stringify(table)}`,
    )
  })

  it('names the argument it is given, and a value JSON cannot show', () => {
    expect(() => parseTableName('bad-name', 'options.table')).toThrow(
      /^options\.table must be an SQL identifier .*; got "bad-name"$/,
    )
    expect(() => parseTableName(undefined)).toThrow(/^table must be .*; got undefined$/)
    expect(() => parseTableName(42)).toThrow(/^table must be .*; got 42$/)
  })
})

describe('assertIdempotencyKey', () => {
  it.each([
    ['', '""'],
    [42, 'number 42'],
    [null, 'null'],
    [undefined, 'undefined'],
    [Buffer.from('m-1'), 'a Buffer'],
    [Object.create(null) as object, 'a object'],
    [{}, 'a Object'],
  ])('refuses %j, describing it', (id, shown) => {
    expect(messageOf(() => assertIdempotencyKey(id))).toBe(
      `id must be a non-empty string; got ${shown}`,
    )
  })

  it('accepts 255 bytes of UTF-8 and refuses 256, saying how many', () => {
    expect(() => assertIdempotencyKey('é'.repeat(127) + 'a')).not.toThrow()
    expect(() => assertIdempotencyKey('é'.repeat(128))).toThrow(
      'id must be at most 255 bytes of UTF-8, as a message id is; got 256 bytes',
    )
  })
})

describe('assertOwnerToken', () => {
  it.each([
    ['', '""'],
    ['has space', '"has space"'],
    [42, 'number 42'],
    [null, 'null'],
    [true, 'boolean true'],
  ])('refuses %j, describing it', (owner, shown) => {
    expect(messageOf(() => assertOwnerToken(owner))).toBe(
      `owner must be 1 to 64 visible ASCII characters (a UUID fits), or omitted; got ${shown}`,
    )
  })
})

describe('isClaimingStore', () => {
  it('tells a store with tryClaim from one with the four basic methods only', () => {
    const full = InMemoryIdempotencyStore.forOneDay()
    const basic: IdempotencyStore = {
      claim: (id) => full.claim(id),
      confirm: (id) => full.confirm(id),
      release: (id) => full.release(id),
      isConfirmed: (id) => full.isConfirmed(id),
    }
    expect(isClaimingStore(full)).toBe(true)
    expect(isClaimingStore(basic)).toBe(false)
  })
})
