import { describe, expect, it } from 'vitest'
import {
  assertApplicationHeaders,
  createEnvelope,
  headerInteger,
  headerString,
  readEnvelope,
  writeCopyHeaders,
  writeEnvelope,
  type Envelope,
} from '../../src/envelope/envelope.js'
import type { Headers } from '../../src/transport/transport.js'

// The edges of the envelope: what is refused and in which words, the boundaries that are still
// accepted, and the headers of a copy (found by mutation testing, docs/mutation.md).

const base: Envelope = createEnvelope(
  { id: 'm-1', firstSeen: 1_900_000_000_000 },
  {
    routingKey: 'orders',
    origin: 'svc@host',
  },
)

describe('createEnvelope', () => {
  it.each([
    [
      'an empty type, quoted',
      { type: '' },
      'envelope.type must be a non-empty string when given; got ""',
    ],
    [
      'a bigint version, with its n',
      { version: 10n },
      'envelope.version must be a whole number from 1 to 2147483647; got 10n',
    ],
    [
      'a text attempt, quoted',
      { attempt: '2' },
      'envelope.attempt must be a whole number from 1 to 2147483647; got "2"',
    ],
    [
      'a fraction',
      { attempt: 1.5 },
      'envelope.attempt must be a whole number from 1 to 2147483647; got 1.5',
    ],
  ])('refuses %s', (_what, init, message) => {
    expect(() => createEnvelope(init as never, { routingKey: 'q' })).toThrow(message)
  })

  it('accepts an id of exactly 255 bytes and refuses one of 256, saying how long it is', () => {
    expect(createEnvelope({ id: 'i'.repeat(255) }, { routingKey: 'q' }).id).toBe('i'.repeat(255))
    expect(() => createEnvelope({ id: 'i'.repeat(256) }, { routingKey: 'q' })).toThrow(
      'envelope.id must be at most 255 bytes of UTF-8 (it is also the AMQP message-id); got 256 bytes',
    )
  })

  it('fills every default when nothing is given', () => {
    const envelope = createEnvelope(undefined, {
      routingKey: 'q',
      now: 1_900_000_000_000,
      origin: 'o@h',
    })
    expect(envelope).toMatchObject({
      type: 'q',
      version: 1,
      attempt: 1,
      firstSeen: 1_900_000_000_000,
      origin: 'o@h',
      causation: undefined,
      claim: undefined,
      error: undefined,
    })
    expect(envelope.correlation).toBe(envelope.id)
  })

  it('accepts a first-seen of 0 (epoch milliseconds are never negative)', () => {
    expect(createEnvelope({ firstSeen: 0 }, { routingKey: 'q' }).firstSeen).toBe(0)
    expect(() => createEnvelope({ firstSeen: -1 }, { routingKey: 'q' })).toThrow(
      'envelope.firstSeen must be epoch milliseconds (a whole, non-negative number); got -1',
    )
  })

  it('names the default it refuses: defaults.now and defaults.origin', () => {
    expect(() => createEnvelope(undefined, { routingKey: 'q', now: -5 })).toThrow(
      /^envelope\.firstSeen \(defaults\.now\) must be epoch milliseconds/,
    )
    expect(() => createEnvelope(undefined, { routingKey: 'q', origin: '' })).toThrow(
      /^envelope\.origin must be a non-empty string when given; got ""$/,
    )
  })

  it('gives a routing key that is not a string an empty type', () => {
    expect(createEnvelope(undefined, { routingKey: 7 as unknown as string }).type).toBe('')
  })
})

describe('readEnvelope', () => {
  it('gives a routing key that is not a string an empty type', () => {
    expect(readEnvelope({}, { routingKey: 7 as unknown as string }).envelope.type).toBe('')
  })

  it('believes a first-seen from the first millisecond of 2000 to the last a Date can hold', () => {
    const read = (value: number): number | undefined =>
      readEnvelope({ 'x-acemq-first-seen': value }, { routingKey: 'q' }).envelope.firstSeen
    expect(read(Date.UTC(2000, 0, 1))).toBe(Date.UTC(2000, 0, 1))
    expect(read(Date.UTC(2000, 0, 1) - 1)).toBeUndefined()
    expect(read(8.64e15)).toBe(8.64e15)
    expect(read(8.64e15 + 1)).toBeUndefined()
  })

  it('keeps an application header called __proto__ as a plain own header', () => {
    const source = JSON.parse('{"__proto__": "x", "a": 1}') as Headers
    const { headers } = readEnvelope(source, { routingKey: 'q' })
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')).toStrictEqual({
      value: 'x',
      enumerable: true,
      writable: true,
      configurable: true,
    })
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
  })
})

describe('assertApplicationHeaders and writeEnvelope', () => {
  it('says which argument when it is named, and nothing before the header when not', () => {
    expect(() => assertApplicationHeaders({ 'x-acemq-a': 1 })).toThrow(
      /^header 'x-acemq-a' uses the reserved x-acemq- prefix/,
    )
    expect(() => assertApplicationHeaders({ 'x-acemq-a': 1 }, 'send(headers)')).toThrow(
      /^send\(headers\): header 'x-acemq-a'/,
    )
    expect(() => writeEnvelope(base, { 'x-acemq-a': 1 })).toThrow(
      /^applicationHeaders: header 'x-acemq-a'/,
    )
  })

  it('refuses a header name over 255 bytes, showing its first 40 characters', () => {
    const name = `${'n'.repeat(40)}${'m'.repeat(220)}`
    expect(() => assertApplicationHeaders({ [name]: 1 })).toThrow(
      `header '${'n'.repeat(40)}…' is longer than AMQP's 255-byte limit for a header name`,
    )
  })

  it('writes the attempt as given up to 2^31 − 1, and 2^31 − 1 beyond', () => {
    const attempt = (value: number): unknown =>
      writeEnvelope({ ...base, attempt: value })['x-acemq-attempt']
    expect(attempt(3)).toStrictEqual({ '!': 'int', value: 3 })
    expect(attempt(2_147_483_647)).toStrictEqual({ '!': 'int', value: 2_147_483_647 })
    expect(attempt(2_147_483_648)).toStrictEqual({ '!': 'int', value: 2_147_483_647 })
  })

  it.each(['type', 'causation', 'claim'] as const)(
    'names the field when %s is not a string',
    (field) => {
      expect(() => writeEnvelope({ ...base, [field]: 5 } as unknown as Envelope)).toThrow(
        `envelope.${field} must be a non-empty string when given; got 5`,
      )
    },
  )

  it('names the error when it is not a string', () => {
    expect(() => writeEnvelope(base, undefined, { error: 5 as unknown as string })).toThrow(
      'envelope.error must be a non-empty string when given; got 5',
    )
  })
})

describe('writeCopyHeaders', () => {
  it('keeps application headers and unknown x-acemq-* headers as they travelled, and writes the envelope anew', () => {
    const original: Headers = {
      'x-tenant': { '!': 'long', value: 7 },
      'x-acemq-route': 'eu',
      'x-acemq-attempt': 1,
      'X-AceMQ-First-Seen': 5,
      'x-acemq-error': 'old reason',
    }
    const copy = writeCopyHeaders(original, { ...base, attempt: 2 })
    expect(copy).toStrictEqual({
      'x-tenant': { '!': 'long', value: 7 },
      'x-acemq-route': 'eu',
      ...writeEnvelope({ ...base, attempt: 2 }),
    })
    expect(copy['x-acemq-error']).toBeUndefined()
  })

  it('writes the reason of a set-aside copy', () => {
    expect(writeCopyHeaders({}, base, { error: 'gave up' })['x-acemq-error']).toBe('gave up')
  })

  it('writes only the envelope when the original headers are not a table', () => {
    for (const original of [undefined, null, ['a'], 'text']) {
      expect(writeCopyHeaders(original as unknown as Headers, base)).toStrictEqual(
        writeEnvelope(base),
      )
    }
  })
})

describe('the lenient header readers', () => {
  it('read a bigint within the safe integers, and nothing beyond them', () => {
    expect(headerInteger(BigInt(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER)
    expect(headerInteger(BigInt(Number.MIN_SAFE_INTEGER))).toBe(Number.MIN_SAFE_INTEGER)
    expect(headerInteger(BigInt(Number.MAX_SAFE_INTEGER) + 1n)).toBeUndefined()
    expect(headerInteger(BigInt(Number.MIN_SAFE_INTEGER) - 1n)).toBeUndefined()
  })

  it.each([
    ['null', null],
    ['a number', 5],
    ['fractional places', { places: 1.5, digits: 100 }],
    ['unsafe digits', { places: 0, digits: 2 ** 60 }],
    ['negative places', { places: -1, digits: 7 }],
    ['negative places on zero digits', { places: -1, digits: 0 }],
    ['text', { places: '0', digits: 7 }],
  ])('read a decimal holding %s as nothing, without throwing', (_what, value) => {
    expect(headerInteger({ '!': 'decimal', value })).toBeUndefined()
  })

  it('read a string typed once, and nothing typed twice, an array or an untyped table', () => {
    expect(headerString({ '!': 'string', value: 'once' })).toBe('once')
    expect(
      headerString({ '!': 'string', value: { '!': 'string', value: 'twice' } }),
    ).toBeUndefined()
    expect(headerString(['a'])).toBeUndefined()
    expect(headerString({ value: 'untyped' })).toBeUndefined()
  })
})
