import { describe, expect, it } from 'vitest'
import { ConfigurationError, OutboxRecord } from '../../src/index.js'

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
