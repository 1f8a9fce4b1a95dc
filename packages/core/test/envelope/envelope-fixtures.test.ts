import { describe, expect, test } from 'vitest'
import { jsonCodec } from '../../src/codec/codec.js'
import { readEnvelope, writeEnvelope } from '../../src/envelope/envelope.js'
import type { Headers } from '../../src/transport/transport.js'
import { envelopeFixtures } from '../fixtures.js'

function unwrap(headers: Headers): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(headers).map(([key, value]) => [
      key,
      typeof value === 'object' && value !== null && '!' in value && 'value' in value
        ? value.value
        : value,
    ]),
  )
}

describe.each(envelopeFixtures.cases)('the $case envelope fixture', (fixture) => {
  const read = () =>
    readEnvelope(fixture.headers, { messageId: fixture.messageId, routingKey: fixture.routingKey })

  test('reads and writes back exactly the headers on the wire', () => {
    const { envelope, headers } = read()
    expect(unwrap(writeEnvelope(envelope, headers))).toStrictEqual(fixture.headers)
  })

  test('writes attempt and version as AMQP int and first-seen as AMQP long', () => {
    const { envelope, headers } = read()
    const written = writeEnvelope(envelope, headers)
    expect(written['x-acemq-attempt']).toStrictEqual({
      '!': 'int',
      value: fixture.headers['x-acemq-attempt'],
    })
    expect(written['x-acemq-version']).toStrictEqual({
      '!': 'int',
      value: fixture.headers['x-acemq-version'],
    })
    expect(written['x-acemq-first-seen']).toStrictEqual({
      '!': 'long',
      value: fixture.headers['x-acemq-first-seen'],
    })
  })

  test('reads every envelope field from its header', () => {
    const { envelope } = read()
    const h = fixture.headers
    expect(envelope).toStrictEqual({
      id: h['x-acemq-id'],
      type: h['x-acemq-type'],
      version: h['x-acemq-version'],
      correlation: h['x-acemq-correlation'],
      causation: h['x-acemq-causation'],
      attempt: h['x-acemq-attempt'],
      firstSeen: h['x-acemq-first-seen'],
      origin: h['x-acemq-origin'],
      claim: undefined,
      error: undefined,
    })
  })

  test('hands over only the application headers', () => {
    const { headers } = read()
    const application = Object.fromEntries(
      Object.entries(fixture.headers).filter(([key]) => !key.startsWith('x-acemq-')),
    )
    expect(headers).toStrictEqual(application)
  })

  test('its JSON body decodes and re-encodes to identical bytes', () => {
    expect(fixture.contentType).toBe('application/json')
    const body = Buffer.from(fixture.body, 'utf8')
    const payload = jsonCodec.decode(body)
    expect(Buffer.from(jsonCodec.encode(payload))).toStrictEqual(body)
  })
})

test('the fixture holds exactly the two cases these tests read, and nothing else', () => {
  expect(Object.keys(envelopeFixtures)).toStrictEqual(['generatedBy', 'contract', 'cases'])
  expect(envelopeFixtures.cases.map((c) => c.case)).toStrictEqual(['minimal', 'populated'])
})

test('the populated fixture keeps its x-tenant application header', () => {
  const populated = envelopeFixtures.cases.find((c) => c.case === 'populated')
  expect(populated).toBeDefined()
  const { envelope, headers } = readEnvelope(populated?.headers, {
    messageId: populated?.messageId,
    routingKey: populated?.routingKey ?? '',
  })
  expect(headers).toStrictEqual({ 'x-tenant': 'acme' })
  expect(writeEnvelope(envelope, headers)['x-tenant']).toBe('acme')
})

test('the fixture bodies are JSON strings that hold JSON text (Java encoded the payload twice)', () => {
  // Recorded, not corrected: the Java generator serialised a string, so the payload a consumer
  // sees is the text '{"id":"o-1"}', not an object. Round-tripping keeps the bytes either way.
  for (const fixture of envelopeFixtures.cases) {
    const payload = jsonCodec.decode(Buffer.from(fixture.body, 'utf8'))
    expect(typeof payload).toBe('string')
    expect(JSON.parse(payload as string)).toHaveProperty('id')
  }
})
