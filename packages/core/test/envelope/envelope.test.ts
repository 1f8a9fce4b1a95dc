import { hostname } from 'node:os'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import {
  ENVELOPE_HEADERS,
  RESERVED_HEADER_PREFIX,
  assertApplicationHeaders,
  createEnvelope,
  defaultOrigin,
  envelopeAge,
  readEnvelope,
  writeEnvelope,
  type Envelope,
} from '../../src/envelope/envelope.js'
import { ConfigurationError } from '../../src/errors.js'
import type { Headers } from '../../src/transport/transport.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const NOW = Date.UTC(2026, 0, 2, 3, 4, 5)
const context = { messageId: 'm-1', routingKey: 'orders.placed' }

function envelopeOf(headers: Headers | undefined): Envelope {
  return readEnvelope(headers, context).envelope
}

describe('the header names', () => {
  test('every envelope header uses the reserved prefix', () => {
    for (const name of Object.values(ENVELOPE_HEADERS)) {
      expect(name.startsWith(RESERVED_HEADER_PREFIX)).toBe(true)
    }
    expect(RESERVED_HEADER_PREFIX).toBe('x-acemq-')
  })
})

describe('createEnvelope', () => {
  test('fills every default of a new publish', () => {
    const envelope = createEnvelope(undefined, { routingKey: 'orders.placed', now: NOW })
    expect(envelope.id).toMatch(UUID)
    expect(envelope).toStrictEqual({
      id: envelope.id,
      type: 'orders.placed',
      version: 1,
      correlation: envelope.id,
      causation: undefined,
      attempt: 1,
      firstSeen: NOW,
      origin: `acemq@${hostname()}`,
      claim: undefined,
      error: undefined,
    })
  })

  test('gives every message its own id', () => {
    const a = createEnvelope(undefined, { routingKey: 'q' })
    const b = createEnvelope(undefined, { routingKey: 'q' })
    expect(a.id).not.toBe(b.id)
  })

  test('uses the clock when no now is given', () => {
    const before = Date.now()
    const envelope = createEnvelope(undefined, { routingKey: 'q' })
    expect(envelope.firstSeen).toBeGreaterThanOrEqual(before)
    expect(envelope.firstSeen).toBeLessThanOrEqual(Date.now())
  })

  test('keeps every field the publisher chose', () => {
    const init = {
      id: 'id-1',
      type: 'order.placed',
      version: 3,
      correlation: 'corr-1',
      causation: 'cause-1',
      origin: 'orders@host-7',
      claim: 's3://bucket/key',
      firstSeen: 1_767_323_045_678,
      attempt: 2,
    }
    expect(createEnvelope(init, { routingKey: 'x', origin: 'other@host', now: NOW })).toStrictEqual(
      { ...init, error: undefined },
    )
  })

  test("takes the connection's origin when the publisher gives none", () => {
    expect(createEnvelope({}, { routingKey: 'q', origin: 'billing@pod-1' }).origin).toBe(
      'billing@pod-1',
    )
  })

  test('is frozen', () => {
    expect(Object.isFrozen(createEnvelope(undefined, { routingKey: 'q' }))).toBe(true)
  })

  test('an empty routing key (a fanout publish) gives an empty type, which is not written', () => {
    const envelope = createEnvelope(undefined, { routingKey: '' })
    expect(envelope.type).toBe('')
    expect(writeEnvelope(envelope)).not.toHaveProperty('x-acemq-type')
  })

  test.each<[string, Record<string, unknown>, RegExp]>([
    ['version 0', { version: 0 }, /^envelope\.version must be a whole number from 1 .*; got 0$/],
    ['a fractional version', { version: 1.5 }, /envelope\.version .*got 1\.5$/],
    ['version 2^31', { version: 2 ** 31 }, /envelope\.version .*got 2147483648$/],
    ['attempt 0', { attempt: 0 }, /^envelope\.attempt must be .*; got 0$/],
    ['a negative attempt', { attempt: -1 }, /envelope\.attempt .*got -1$/],
    ['an attempt as text', { attempt: '2' }, /envelope\.attempt .*got "2"$/],
    ['an empty id', { id: '' }, /^envelope\.id must be a non-empty string when given; got ""$/],
    ['an empty type', { type: '' }, /envelope\.type .*got ""$/],
    ['an empty correlation', { correlation: '' }, /envelope\.correlation .*got ""$/],
    ['an empty causation', { causation: '' }, /envelope\.causation .*got ""$/],
    ['an empty origin', { origin: '' }, /envelope\.origin .*got ""$/],
    ['an empty claim', { claim: '' }, /envelope\.claim .*got ""$/],
    ['a numeric id', { id: 42 }, /envelope\.id .*got 42$/],
    ['a negative first-seen', { firstSeen: -1 }, /^envelope\.firstSeen must be epoch .*got -1$/],
    ['a fractional first-seen', { firstSeen: 1.5 }, /envelope\.firstSeen .*got 1\.5$/],
  ])('refuses %s, naming the field and the value', (_name, init, message) => {
    const create = (): Envelope => createEnvelope(init, { routingKey: 'q' })
    expect(create).toThrow(ConfigurationError)
    expect(create).toThrow(message)
  })
})

describe('defaultOrigin', () => {
  test('is acemq@ and the host name', () => {
    expect(defaultOrigin()).toBe(`acemq@${hostname()}`)
  })
})

describe('readEnvelope', () => {
  test('gives a header-less message every default', () => {
    const { envelope, headers } = readEnvelope({}, context)
    expect(envelope).toStrictEqual({
      id: 'm-1',
      type: 'orders.placed',
      version: 1,
      correlation: 'm-1',
      causation: undefined,
      attempt: 1,
      firstSeen: undefined,
      origin: undefined,
      claim: undefined,
      error: undefined,
    })
    expect(headers).toStrictEqual({})
  })

  test('reads undefined headers like empty ones', () => {
    expect(readEnvelope(undefined, context).envelope.id).toBe('m-1')
  })

  test('makes up a UUID when there is neither an id header nor a message id', () => {
    const { envelope } = readEnvelope({}, { routingKey: 'q' })
    expect(envelope.id).toMatch(UUID)
    expect(envelope.correlation).toBe(envelope.id)
  })

  test('makes up a UUID when the message id is empty', () => {
    expect(readEnvelope({}, { messageId: '', routingKey: 'q' }).envelope.id).toMatch(UUID)
  })

  test('prefers the id header over the message id', () => {
    expect(envelopeOf({ 'x-acemq-id': 'h-1' }).id).toBe('h-1')
  })

  test('an empty id header falls back to the message id', () => {
    expect(envelopeOf({ 'x-acemq-id': '' }).id).toBe('m-1')
  })

  test('a missing correlation is the id, even a made-up one', () => {
    expect(envelopeOf({ 'x-acemq-id': 'h-1' }).correlation).toBe('h-1')
    expect(envelopeOf({ 'x-acemq-id': 'h-1', 'x-acemq-correlation': '' }).correlation).toBe('h-1')
  })

  test('a missing type is the routing key', () => {
    expect(envelopeOf({ 'x-acemq-type': null }).type).toBe('orders.placed')
  })

  test.each<[string, unknown, number]>([
    ['a plain number', 3, 3],
    ['a byte-width number', 2, 2],
    ['a typed int', { '!': 'int', value: 4 }, 4],
    ['a typed long', { '!': 'long', value: 5 }, 5],
    ['a bigint', 6n, 6],
    ['a decimal string', '7', 7],
    ['decimal bytes', Buffer.from('8'), 8],
    ['the largest 32-bit int', 2 ** 31 - 1, 2 ** 31 - 1],
  ])('reads an attempt and a version given as %s', (_name, value, expected) => {
    const envelope = envelopeOf({ 'x-acemq-attempt': value, 'x-acemq-version': value })
    expect(envelope.attempt).toBe(expected)
    expect(envelope.version).toBe(expected)
  })

  test.each<[string, unknown]>([
    ['zero', 0],
    ['a negative', -1],
    ['a fraction', 1.5],
    ['a number beyond 32 bits', 2 ** 31],
    ['a number beyond 53 bits', 2 ** 60],
    ['a huge bigint', 2n ** 70n],
    ['a boolean', true],
    ['an array', [2]],
    ['a table', { attempt: 2 }],
    ['text that is not a number', 'second'],
    ['a typed zero', { '!': 'int', value: 0 }],
    ['null', null],
  ])('an attempt or version that is %s falls back to 1', (_name, value) => {
    const envelope = envelopeOf({ 'x-acemq-attempt': value, 'x-acemq-version': value })
    expect(envelope.attempt).toBe(1)
    expect(envelope.version).toBe(1)
  })

  test.each<[string, unknown]>([
    ['a plain number', 1_767_323_045_678],
    ['a typed long', { '!': 'long', value: 1_767_323_045_678 }],
    ['a bigint', 1_767_323_045_678n],
    ['a decimal string', '1767323045678'],
    ['decimal bytes', Buffer.from('1767323045678')],
  ])('reads a first-seen given as %s', (_name, value) => {
    expect(envelopeOf({ 'x-acemq-first-seen': value }).firstSeen).toBe(1_767_323_045_678)
  })

  test.each<[string, unknown]>([
    ['zero', 0],
    ['a negative', -1_767_323_045_678],
    ['seconds instead of milliseconds', 1_767_323_045],
    ['a fraction', 1_767_323_045_678.5],
    ['beyond what a Date holds', 8.64e15 + 1],
    ['beyond 64 bits', 2n ** 64n],
    ['a boolean', false],
    ['a table', { at: 1 }],
    ['an ISO date string', '2026-01-02T03:04:05Z'],
  ])('a first-seen that is %s is unknown, so the message is not decades old', (_name, value) => {
    const envelope = envelopeOf({ 'x-acemq-first-seen': value })
    expect(envelope.firstSeen).toBeUndefined()
    expect(envelopeAge(envelope, Date.now())).toBe(0)
  })

  test('reads every string field from Buffers as UTF-8', () => {
    const envelope = envelopeOf({
      'x-acemq-id': Buffer.from('id-ü'),
      'x-acemq-type': Buffer.from('order.placed'),
      'x-acemq-correlation': Buffer.from('corr'),
      'x-acemq-causation': Buffer.from('cause'),
      'x-acemq-origin': Buffer.from('orders@host'),
      'x-acemq-claim': new TextEncoder().encode('s3://b/k'),
      'x-acemq-error': Buffer.from('gave up'),
    })
    expect(envelope).toMatchObject({
      id: 'id-ü',
      type: 'order.placed',
      correlation: 'corr',
      causation: 'cause',
      origin: 'orders@host',
      claim: 's3://b/k',
      error: 'gave up',
    })
  })

  test('a string field that is not a string falls back to its default', () => {
    const envelope = envelopeOf({
      'x-acemq-id': { nested: true },
      'x-acemq-type': [1],
      'x-acemq-causation': false,
      'x-acemq-origin': Uint8Array.of(0xff, 0xfe),
    })
    expect(envelope).toMatchObject({
      id: 'm-1',
      type: 'orders.placed',
      causation: undefined,
      origin: undefined,
    })
  })

  test('removes every x-acemq- header, known or not, and keeps the rest', () => {
    const { headers } = readEnvelope(
      {
        'x-acemq-id': 'h-1',
        'x-acemq-from-the-future': 'v9',
        'X-AceMQ-Shouting': 'yes',
        'x-tenant': 'acme',
        'acemq-shared': 'kept',
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        tracestate: 'congo=t61rcWkgMzE',
        'x-death': [{ count: 1 }],
      },
      context,
    )
    expect(headers).toStrictEqual({
      'x-tenant': 'acme',
      'acemq-shared': 'kept',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: 'congo=t61rcWkgMzE',
      'x-death': [{ count: 1 }],
    })
  })

  test('does not modify the headers it was given', () => {
    const given = { 'x-acemq-id': 'h-1', 'x-tenant': 'acme' }
    readEnvelope(given, context)
    expect(given).toStrictEqual({ 'x-acemq-id': 'h-1', 'x-tenant': 'acme' })
  })

  test('a __proto__ header stays an ordinary header', () => {
    const given = JSON.parse('{"__proto__": "x", "x-acemq-id": "h-1"}') as Headers
    const { headers } = readEnvelope(given, context)
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
    expect(Object.hasOwn(headers, '__proto__')).toBe(true)
  })

  test('headers that are not a table read as none', () => {
    for (const bad of [null, [], 'x-acemq-id', 42]) {
      const { envelope, headers } = readEnvelope(bad as unknown as Headers, context)
      expect(envelope.id).toBe('m-1')
      expect(headers).toStrictEqual({})
    }
  })

  test('never throws and always yields a usable envelope, whatever the headers hold', () => {
    const key = fc.oneof(fc.constantFrom(...Object.values(ENVELOPE_HEADERS)), fc.string())
    const value = fc.anything({ withBigInt: true, withTypedArray: true, withNullPrototype: true })
    fc.assert(
      fc.property(fc.dictionary(key, value), fc.option(fc.string()), (headers, messageId) => {
        const { envelope, headers: application } = readEnvelope(headers, {
          messageId: messageId ?? undefined,
          routingKey: 'q',
        })
        expect(envelope.id).not.toBe('')
        expect(envelope.correlation).not.toBe('')
        expect(Number.isInteger(envelope.attempt) && envelope.attempt >= 1).toBe(true)
        expect(Number.isInteger(envelope.version) && envelope.version >= 1).toBe(true)
        expect(envelopeAge(envelope, Date.now())).toBeLessThan(60 * 365 * 86_400_000)
        for (const name of Object.keys(application)) {
          expect(name.toLowerCase().startsWith('x-acemq-')).toBe(false)
        }
      }),
    )
  })
})

describe('writeEnvelope', () => {
  const envelope = createEnvelope(
    { id: 'id-1', correlation: 'corr-1', origin: 'o@h' },
    { routingKey: 'orders.placed', now: NOW },
  )

  test('writes attempt and version as AMQP int and first-seen as AMQP long', () => {
    expect(writeEnvelope(envelope)).toStrictEqual({
      'x-acemq-id': 'id-1',
      'x-acemq-type': 'orders.placed',
      'x-acemq-version': { '!': 'int', value: 1 },
      'x-acemq-correlation': 'corr-1',
      'x-acemq-attempt': { '!': 'int', value: 1 },
      'x-acemq-first-seen': { '!': 'long', value: NOW },
      'x-acemq-origin': 'o@h',
    })
  })

  test('puts the application headers first, then the envelope', () => {
    const keys = Object.keys(writeEnvelope(envelope, { 'x-tenant': 'acme', traceparent: 't' }))
    expect(keys.slice(0, 2)).toStrictEqual(['x-tenant', 'traceparent'])
  })

  test("writes a header named '__proto__' as a header, not as the object's prototype", () => {
    const written = writeEnvelope(envelope, JSON.parse('{"__proto__": "x", "a": 1}') as Headers)
    expect(Object.keys(written).slice(0, 2)).toStrictEqual(['__proto__', 'a'])
    expect(Object.getPrototypeOf(written)).toBe(Object.prototype)
    expect(Object.getOwnPropertyDescriptor(written, '__proto__')?.value).toBe('x')
  })

  test('omits empty and missing fields rather than writing "" or null', () => {
    const sparse: Envelope = {
      ...envelope,
      causation: '',
      origin: undefined,
      claim: undefined,
      firstSeen: undefined,
    }
    const written = writeEnvelope(sparse, { 'x-gone': undefined }, { error: '' })
    expect(Object.keys(written).sort()).toStrictEqual([
      'x-acemq-attempt',
      'x-acemq-correlation',
      'x-acemq-id',
      'x-acemq-type',
      'x-acemq-version',
    ])
    expect(Object.values(written)).not.toContain(null)
    expect(Object.values(written)).not.toContain('')
  })

  test('carries a claim written by another library', () => {
    const { envelope: read, headers } = readEnvelope(
      { 'x-acemq-id': 'id-1', 'x-acemq-claim': 'claim-check://orders/1' },
      context,
    )
    expect(writeEnvelope(read, headers)['x-acemq-claim']).toBe('claim-check://orders/1')
  })

  test('writes the error only when a reason is given', () => {
    const { envelope: fromDlq } = readEnvelope(
      { 'x-acemq-id': 'id-1', 'x-acemq-error': 'gave up after 3 attempt(s): boom' },
      context,
    )
    expect(fromDlq.error).toBe('gave up after 3 attempt(s): boom')
    expect(writeEnvelope(fromDlq)).not.toHaveProperty('x-acemq-error')
    expect(writeEnvelope(envelope, {}, { error: 'could not decode: bad' })['x-acemq-error']).toBe(
      'could not decode: bad',
    )
  })

  test('writes an advanced attempt', () => {
    expect(writeEnvelope({ ...envelope, attempt: 4 })['x-acemq-attempt']).toStrictEqual({
      '!': 'int',
      value: 4,
    })
  })

  test('holds an attempt beyond 32 bits at the largest 32-bit int', () => {
    expect(writeEnvelope({ ...envelope, attempt: 2 ** 31 })['x-acemq-attempt']).toStrictEqual({
      '!': 'int',
      value: 2 ** 31 - 1,
    })
  })

  test('refuses an application header with the reserved prefix', () => {
    const write = (): Headers => writeEnvelope(envelope, { 'x-acemq-foo': 'bar' })
    expect(write).toThrow(ConfigurationError)
    expect(write).toThrow(
      "header 'x-acemq-foo' uses the reserved x-acemq- prefix: use your own namespace (for example 'x-myapp-foo')",
    )
  })

  test.each<[string, Partial<Record<keyof Envelope, unknown>>, RegExp]>([
    ['version 0', { version: 0 }, /envelope\.version .*got 0/],
    ['a fractional attempt', { attempt: 1.5 }, /envelope\.attempt .*got 1\.5/],
    ['an empty id', { id: '' }, /envelope\.id .*got ""/],
    ['a missing correlation', { correlation: undefined }, /envelope\.correlation .*undefined/],
    ['a negative first-seen', { firstSeen: -5 }, /envelope\.firstSeen .*got -5/],
    ['a numeric origin', { origin: 7 }, /envelope\.origin .*got 7/],
  ])('refuses an envelope with %s instead of writing a broken header', (_name, patch, message) => {
    const broken = { ...envelope, ...patch } as Envelope
    expect(() => writeEnvelope(broken)).toThrow(ConfigurationError)
    expect(() => writeEnvelope(broken)).toThrow(message)
  })

  test('what it writes reads back as the same envelope', () => {
    const text = fc.string({ minLength: 1 })
    const init = fc.record(
      {
        id: text,
        type: text,
        version: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        correlation: text,
        causation: text,
        origin: text,
        claim: text,
        firstSeen: fc.integer({ min: Date.UTC(2000, 0, 1), max: 8.64e15 }),
        attempt: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
      },
      { requiredKeys: [] },
    )
    fc.assert(
      fc.property(init, (given) => {
        const created = createEnvelope(given, { routingKey: 'q', now: NOW })
        const { envelope: read } = readEnvelope(writeEnvelope(created), { routingKey: 'other' })
        expect(read).toStrictEqual(created)
      }),
    )
  })
})

describe('assertApplicationHeaders', () => {
  test('accepts no headers, and ordinary ones', () => {
    expect(() => assertApplicationHeaders(undefined)).not.toThrow()
    expect(() =>
      assertApplicationHeaders({ 'x-tenant': 'acme', 'acemq-shared': 1, traceparent: 't' }),
    ).not.toThrow()
  })

  test('refuses the reserved prefix in any letter case, and says what to use', () => {
    expect(() => assertApplicationHeaders({ 'X-AceMQ-Tenant': 'acme' })).toThrow(
      "header 'X-AceMQ-Tenant' uses the reserved x-acemq- prefix: use your own namespace (for example 'x-myapp-Tenant')",
    )
  })

  test('refuses even an envelope header name', () => {
    expect(() => assertApplicationHeaders({ 'x-acemq-attempt': 1 })).toThrow(ConfigurationError)
  })

  test('names the argument when told it', () => {
    expect(() => assertApplicationHeaders({ 'x-acemq-foo': 1 }, 'options.headers')).toThrow(
      /^options\.headers: header 'x-acemq-foo' uses the reserved/,
    )
  })

  test('refuses headers that are not a table', () => {
    expect(() => assertApplicationHeaders([] as unknown as Headers, 'headers')).toThrow(
      /^headers: headers must be an object/,
    )
    expect(() => assertApplicationHeaders(null as unknown as Headers)).toThrow(ConfigurationError)
  })

  test('refuses a header name beyond the 255-byte AMQP limit', () => {
    expect(() => assertApplicationHeaders({ ['x-'.padEnd(256, 'a')]: 1 })).toThrow(
      /longer than AMQP's 255-byte limit/,
    )
    expect(() => assertApplicationHeaders({ ['x-'.padEnd(255, 'a')]: 1 })).not.toThrow()
  })
})

describe('envelopeAge', () => {
  const base = createEnvelope(undefined, { routingKey: 'q', now: NOW })

  test('is the time since first-seen', () => {
    expect(envelopeAge(base, NOW + 90_000)).toBe(90_000)
  })

  test('is 0 when first-seen is unknown', () => {
    expect(envelopeAge({ ...base, firstSeen: undefined }, NOW)).toBe(0)
  })

  test('is 0 when first-seen is in the future (clocks disagree)', () => {
    expect(envelopeAge(base, NOW - 5_000)).toBe(0)
  })

  test('is 0 rather than NaN for a broken clock', () => {
    expect(envelopeAge(base, Number.NaN)).toBe(0)
  })
})
