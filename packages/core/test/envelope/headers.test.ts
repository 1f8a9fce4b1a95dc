import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { headerInteger, headerString } from '../../src/envelope/envelope.js'

const notUtf8 = Uint8Array.of(0xff, 0xfe, 0x41)

describe('headerInteger', () => {
  test.each<[string, unknown, number]>([
    ['a small number', 3, 3],
    ['zero', 0, 0],
    ['a negative number (range checks are the caller’s)', -5, -5],
    ['a 64-bit epoch', 1_767_323_045_678, 1_767_323_045_678],
    ['a float with no fraction (amqplib decodes doubles as numbers)', 2.0, 2],
    ['a bigint', 7n, 7],
    ["amqplib's typed int", { '!': 'int', value: 3 }, 3],
    ["amqplib's typed long", { '!': 'long', value: 1_767_323_045_678 }, 1_767_323_045_678],
    ["amqplib's typed timestamp", { '!': 'timestamp', value: 1_700_000_000 }, 1_700_000_000],
    ['a typed bigint', { '!': 'long', value: 9n }, 9],
    ['a zero-place decimal', { '!': 'decimal', value: { places: 0, digits: 7 } }, 7],
    [
      'a decimal that scales to a whole number',
      { '!': 'decimal', value: { places: 2, digits: 700 } },
      7,
    ],
    ['a decimal string', '42', 42],
    ['a decimal string with spaces and a sign', ' +42 ', 42],
    ['a negative decimal string', '-1', -1],
    ['decimal text as a Buffer', Buffer.from('42'), 42],
    ['decimal text as a Uint8Array', new TextEncoder().encode('12'), 12],
  ])('reads %s', (_name, value, expected) => {
    expect(headerInteger(value)).toBe(expected)
  })

  test.each<[string, unknown]>([
    ['a fraction', 1.5],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a number beyond MAX_SAFE_INTEGER', 2 ** 53],
    ['a huge bigint', 2n ** 64n],
    ['a typed fraction', { '!': 'double', value: 2.5 }],
    ['a decimal with a fraction', { '!': 'decimal', value: { places: 2, digits: 750 } }],
    ['a malformed decimal', { '!': 'decimal', value: 'seven' }],
    ['a typed value nested in a typed value', { '!': 'int', value: { '!': 'int', value: 1 } }],
    ['a fraction as text', '1.5'],
    ['an exponent as text', '1e3'],
    ['hex text', '0x10'],
    ['an empty string', ''],
    ['words', 'three'],
    ['bytes that are not UTF-8', notUtf8],
    ['empty bytes', new Uint8Array()],
    ['true', true],
    ['false', false],
    ['null', null],
    ['undefined', undefined],
    ['an array', [1]],
    ['a table', { value: 1 }],
    ['an empty table', {}],
    ['a function', () => 1],
    ['a symbol', Symbol('1')],
  ])('reads %s as undefined', (_name, value) => {
    expect(headerInteger(value)).toBeUndefined()
  })

  test('reads every safe integer the same in every shape', () => {
    fc.assert(
      fc.property(fc.maxSafeInteger(), (n) => {
        expect(headerInteger(n)).toBe(n)
        expect(headerInteger(BigInt(n))).toBe(n)
        expect(headerInteger(String(n))).toBe(n)
        expect(headerInteger(Buffer.from(String(n)))).toBe(n)
        expect(headerInteger({ '!': 'long', value: n })).toBe(n)
      }),
    )
  })

  test('never throws, whatever arrives', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withTypedArray: true, withMap: true }), (v) => {
        const read = headerInteger(v)
        expect(read === undefined || Number.isSafeInteger(read)).toBe(true)
      }),
    )
  })
})

describe('headerString', () => {
  test.each<[string, unknown, string]>([
    ['a string', 'orders@host-7', 'orders@host-7'],
    ['UTF-8 bytes in a Buffer', Buffer.from('héllo wörld'), 'héllo wörld'],
    ['UTF-8 bytes in a Uint8Array', new TextEncoder().encode('ключ'), 'ключ'],
    ['a typed string', { '!': 'string', value: 'x' }, 'x'],
    ['typed bytes', { '!': 'bytes', value: Buffer.from('y') }, 'y'],
    ['a whole number', 42, '42'],
    ['a bigint', 12345678901234567890n, '12345678901234567890'],
    ['whitespace, unchanged', ' a ', ' a '],
  ])('reads %s', (_name, value, expected) => {
    expect(headerString(value)).toBe(expected)
  })

  test.each<[string, unknown]>([
    ['an empty string', ''],
    ['empty bytes', Buffer.alloc(0)],
    ['bytes that are not UTF-8', notUtf8],
    ['a fraction', 1.5],
    ['true', true],
    ['null', null],
    ['undefined', undefined],
    ['an array', ['a']],
    ['a table', { a: 'b' }],
  ])('reads %s as undefined', (_name, value) => {
    expect(headerString(value)).toBeUndefined()
  })

  test('reads text and its UTF-8 bytes as the same string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1 }), (text) => {
        expect(headerString(text)).toBe(text)
        expect(headerString(Buffer.from(text, 'utf8'))).toBe(text)
      }),
    )
  })

  test('never throws, whatever arrives', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withTypedArray: true, withMap: true }), (v) => {
        const read = headerString(v)
        expect(read === undefined || (typeof read === 'string' && read !== '')).toBe(true)
      }),
    )
  })
})
