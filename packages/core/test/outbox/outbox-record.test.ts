import { describe, expect, it } from 'vitest'
import { CodecRegistry, ConfigurationError, OutboxRecord } from '../../src/index.js'

describe('OutboxRecord.of', () => {
  it('encodes the payload as JSON by default and gives the record a UUID id', () => {
    const record = OutboxRecord.of('orders', 'order.placed', { id: 'o-1', total: 12 })
    expect(record.contentType).toBe('application/json')
    expect(JSON.parse(Buffer.from(record.body).toString())).toEqual({ id: 'o-1', total: 12 })
    expect(record.id).toMatch(/^[0-9a-f-]{36}$/)
    expect(record.exchange).toBe('orders')
    expect(record.routingKey).toBe('order.placed')
    expect(Object.isFrozen(record)).toBe(true)
  })

  it('keeps the id, headers and envelope fields it is given', () => {
    const record = OutboxRecord.of('', 'orders.placed', 'hello', {
      id: 'order-7',
      contentType: 'text/plain',
      headers: { 'x-tenant': 'acme' },
      correlation: 'c-1',
      version: 3,
    })
    expect(record.id).toBe('order-7')
    expect(Buffer.from(record.body).toString()).toBe('hello')
    expect(record.headers).toEqual({ 'x-tenant': 'acme' })
    expect(record.envelope).toEqual({ correlation: 'c-1', version: 3 })
  })

  it('refuses reserved headers, header values JSON cannot keep, bad ids and versions', () => {
    expect(() => OutboxRecord.of('', 'q', {}, { headers: { 'x-acemq-id': 'a' } })).toThrow(
      /reserved/,
    )
    expect(() =>
      OutboxRecord.of('', 'q', {}, { headers: { when: new Date() as unknown as string } }),
    ).toThrow(/header 'when'/)
    expect(() => OutboxRecord.of('', 'q', {}, { id: '' })).toThrow(ConfigurationError)
    expect(() => OutboxRecord.of('', 'q', {}, { version: 0 })).toThrow(/version/)
    expect(() => OutboxRecord.of('', 'q', {}, { contentType: 'application/xml' })).toThrow(
      /no codec/,
    )
  })
})

describe('OutboxRecord.of, argument by argument', () => {
  it('takes an exchange and a routing key of up to 255 bytes, and names either past that', () => {
    const long = 'x'.repeat(255)
    expect(OutboxRecord.of(long, long, {}).exchange).toBe(long)
    expect(() => OutboxRecord.of(`${long}x`, 'q', {})).toThrow(
      `OutboxRecord.of(exchange) must be a string of at most 255 bytes ('' for the default exchange); got "${long}x"`,
    )
    expect(() => OutboxRecord.of(7 as unknown as string, 'q', {})).toThrow(
      /OutboxRecord.of\(exchange\)/,
    )
    expect(() => OutboxRecord.of('', `${long}x`, {})).toThrow(
      `OutboxRecord.of(routingKey) must be a string of at most 255 bytes; got "${long}x"`,
    )
    expect(() => OutboxRecord.of('', 7 as unknown as string, {})).toThrow(
      /OutboxRecord.of\(routingKey\)/,
    )
    // 128 two-byte characters: 256 bytes.
    expect(() => OutboxRecord.of('é'.repeat(128), 'q', {})).toThrow(/exchange/)
  })

  it('takes an id of up to 255 bytes', () => {
    expect(OutboxRecord.of('', 'q', {}, { id: 'i'.repeat(255) }).id).toHaveLength(255)
    expect(() => OutboxRecord.of('', 'q', {}, { id: 'i'.repeat(256) })).toThrow(/255 bytes/)
    expect(OutboxRecord.of('', 'q', {}).id).not.toBe(OutboxRecord.of('', 'q', {}).id)
  })

  it('names a content type no codec takes, and encodes with the codecs it is given', () => {
    expect(() => OutboxRecord.of('', 'q', {}, { contentType: 'application/xml' })).toThrow(
      'OutboxRecord.of(options.contentType): no codec is registered for "application/xml"',
    )
    const codecs = CodecRegistry.defaults().with({
      contentType: 'application/x-upper',
      encode: (value: unknown) => Buffer.from(String(value).toUpperCase()),
      decode: (bytes: Uint8Array) => Buffer.from(bytes).toString(),
    })
    const record = OutboxRecord.of('', 'q', 'hi', { codecs, contentType: 'application/x-upper' })
    expect(record.contentType).toBe('application/x-upper')
    expect(Buffer.from(record.body).toString()).toBe('HI')
  })

  it('keeps string, number and boolean headers in a frozen copy, and names any other by key', () => {
    const headers = { 'x-a': 'a', 'x-n': 1.5, 'x-b': false }
    const record = OutboxRecord.of('', 'q', {}, { headers })
    expect(record.headers).toEqual(headers)
    expect(record.headers).not.toBe(headers)
    expect(Object.isFrozen(record.headers)).toBe(true)
    expect(Object.isFrozen(OutboxRecord.of('', 'q', {}).headers)).toBe(true)
    expect(OutboxRecord.of('', 'q', {}).headers).toEqual({})
    for (const [value, type] of [
      [Number.NaN, 'number'],
      [Number.POSITIVE_INFINITY, 'number'],
      [null, 'object'],
      [undefined, 'undefined'],
      [1n, 'bigint'],
    ] as const) {
      expect(() =>
        OutboxRecord.of('', 'q', {}, { headers: { 'x-bad': value as unknown as string } }),
      ).toThrow(
        `OutboxRecord.of(options.headers): header 'x-bad' must be a string, a finite number or a boolean (it is stored as JSON); got ${type}`,
      )
    }
    expect(() => OutboxRecord.of('', 'q', {}, { headers: { 'x-acemq-attempt': 1 } })).toThrow(
      /^OutboxRecord.of\(options.headers\): header 'x-acemq-attempt'/,
    )
  })

  it('keeps the type, correlation and causation it is given in a frozen envelope, and refuses empty ones by name', () => {
    const record = OutboxRecord.of(
      '',
      'q',
      {},
      { type: 'order.placed', correlation: 'c-1', causation: 'm-0', version: 2_147_483_647 },
    )
    expect(record.envelope).toEqual({
      type: 'order.placed',
      correlation: 'c-1',
      causation: 'm-0',
      version: 2_147_483_647,
    })
    expect(Object.isFrozen(record.envelope)).toBe(true)
    expect(OutboxRecord.of('', 'q', {}).envelope).toEqual({})
    expect(OutboxRecord.of('', 'q', {}, { version: 1 }).envelope).toEqual({ version: 1 })
    for (const field of ['type', 'correlation', 'causation'] as const) {
      expect(() => OutboxRecord.of('', 'q', {}, { [field]: '' })).toThrow(
        `OutboxRecord.of(options.${field}) must be a non-empty string when given; got ""`,
      )
      expect(() => OutboxRecord.of('', 'q', {}, { [field]: 3 as unknown as string })).toThrow(
        `OutboxRecord.of(options.${field}) must be a non-empty string when given; got 3`,
      )
    }
  })

  it('refuses a version that is no whole number from 1 to 2147483647, naming it', () => {
    for (const version of [0, -1, 1.5, 2_147_483_648, Number.NaN, '2']) {
      expect(() => OutboxRecord.of('', 'q', {}, { version: version as number })).toThrow(
        `OutboxRecord.of(options.version) must be a whole number from 1; got ${String(version)}`,
      )
    }
  })
})
