import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import {
  codecSamples,
  expectDecodeFailure,
  samplesOf,
} from '../../../test-support/codec-samples.js'
import { avroCodec, registeredAvroCodec, type AvroSchema } from '../src/index.js'

const schema = codecSamples.avro_schema as AvroSchema
const plain = avroCodec({ schema })
const registered = registeredAvroCodec({ schemas: { 7: schema }, writeSchemaId: 7 })
const order = { orderId: 'o-1', totalCents: 4250, tenant: 'acme' }

describe('avroCodec (avro/binary)', () => {
  it('writes and reads avro/binary, the family’s content type', () => {
    expect(plain.contentType).toBe('avro/binary')
    expect(new Set(samplesOf('avro').map((sample) => sample.content_type))).toEqual(
      new Set(['avro/binary']),
    )
  })

  it.each(samplesOf('avro').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample to the expected value',
    (_producer, sample) => {
      expect({ ...(plain.decode(sample.body) as object) }).toStrictEqual(sample.expected)
    },
  )

  it.each(samplesOf('avro').map((sample) => [sample.producer, sample] as const))(
    'writes the %s library’s bytes for the same value',
    (_producer, sample) => {
      expect(Buffer.from(plain.encode(sample.expected))).toEqual(Buffer.from(sample.body))
    },
  )

  it('reads back what it writes', () => {
    const value = { orderId: 'o-2 Söderström', totalCents: -4_503_599_627_370_496, tenant: '' }
    expect({ ...(plain.decode(plain.encode(value)) as object) }).toStrictEqual(value)
  })

  it.each([
    [
      'a body cut short',
      Buffer.from('Bm8tMbRC', 'base64'),
      /not Avro binary of org\.acemq\.test\.OrderPlaced \(6 byte\(s\)\): truncated buffer/,
    ],
    ['a body with bytes left over', Buffer.from('Bm8tMbRCCGFjbWUA', 'base64'), /trailing data/],
    ['an empty body', Buffer.alloc(0), /truncated buffer/],
    [
      'a long too large for a number',
      Buffer.from([
        6, 0x6f, 0x2d, 0x31, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0,
      ]),
      /potential precision loss/,
    ],
    ['a registered body', Buffer.from('AAAAAAcGby0xtEIIYWNtZQ==', 'base64'), /not Avro binary/],
  ])('refuses %s with a decode error that says why', (_what, body, reason) => {
    expectDecodeFailure(plain, body, reason)
  })

  it('refuses to encode a value that does not fit the schema, listing the fields', () => {
    expect(() => plain.encode({ orderId: 'o-1', totalCents: 1.5 })).toThrow(ConfigurationError)
    expect(() => plain.encode({ orderId: 'o-1', totalCents: 1.5 })).toThrow(
      /payload does not fit the Avro schema org\.acemq\.test\.OrderPlaced: totalCents = 1\.5 is not long; tenant = undefined is not string/,
    )
  })

  it('refuses to encode a long that avsc would write as another number', () => {
    expect(() => plain.encode({ ...order, totalCents: -4_503_599_627_370_497 })).toThrow(
      /payload cannot be written as Avro exactly: a long below -4503599627370496 \(-2\^52\) would be sent as another number/,
    )
  })

  it('refuses a schema avsc cannot read, naming the option', () => {
    expect(() =>
      avroCodec({ schema: { type: 'record', name: 'X', fields: [{ name: 'a', type: 'nope' }] } }),
    ).toThrow(/avroCodec\(options\.schema\) is not a valid Avro schema: /)
    expect(() => avroCodec({ schema: null as never })).toThrow(
      /avroCodec\(options\.schema\) must be an Avro schema/,
    )
  })
})

describe('registeredAvroCodec (application/vnd.acemq.avro)', () => {
  it('writes and reads application/vnd.acemq.avro, the family’s content type', () => {
    expect(registered.contentType).toBe('application/vnd.acemq.avro')
    expect(new Set(samplesOf('avro-registered').map((sample) => sample.content_type))).toEqual(
      new Set(['application/vnd.acemq.avro']),
    )
  })

  it.each(samplesOf('avro-registered').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample (schema id 7) to the expected value',
    (_producer, sample) => {
      expect({ ...(registered.decode(sample.body) as object) }).toStrictEqual(sample.expected)
    },
  )

  it('writes a zero byte, the schema id big-endian, then the plain body: the family’s bytes', () => {
    const [sample] = samplesOf('avro-registered')
    const body = Buffer.from(registered.encode(order))
    expect(body.subarray(0, 5)).toEqual(Buffer.from([0, 0, 0, 0, 7]))
    expect(body.subarray(5)).toEqual(Buffer.from(plain.encode(order)))
    expect(body).toEqual(Buffer.from(sample?.body ?? []))
  })

  it('writes a schema id above 2^31 as four unsigned bytes and reads it back', () => {
    const codec = registeredAvroCodec({
      schemas: new Map([[0xfffffffe, schema]]),
      writeSchemaId: 0xfffffffe,
    })
    const body = Buffer.from(codec.encode(order))
    expect(body.subarray(0, 5)).toEqual(Buffer.from([0, 0xff, 0xff, 0xff, 0xfe]))
    expect({ ...(codec.decode(body) as object) }).toStrictEqual(order)
  })

  it('reads a body written with an older schema id it still holds', () => {
    const v1 = codecSamples.avro_schema as { fields: object[] }
    const v2 = { ...v1, fields: [...v1.fields, { name: 'note', type: 'string' }] } as AvroSchema
    const reader = registeredAvroCodec({ schemas: { 7: schema, 8: v2 }, writeSchemaId: 8 })
    const [sample] = samplesOf('avro-registered')
    expect({ ...(reader.decode(sample?.body ?? new Uint8Array()) as object) }).toStrictEqual(order)
    expect({ ...(reader.decode(reader.encode({ ...order, note: 'n' })) as object) }).toStrictEqual({
      ...order,
      note: 'n',
    })
  })

  it.each([
    [
      'a body without the zero byte',
      Buffer.from('Bm8tMbRCCGFjbWU=', 'base64'),
      /not registered Avro: it must start with a zero byte and a 4-byte schema id \(11 byte\(s\) starting 06 6f 2d 31/,
    ],
    ['a body shorter than the header', Buffer.from([0, 0, 0, 7]), /not registered Avro/],
    [
      'a schema id it does not know',
      Buffer.from('AAAAAAgGby0xtEIIYWNtZQ==', 'base64'),
      /names Avro schema id 8, which this codec does not know \(it knows 7\)/,
    ],
    [
      'a body cut short after the header',
      Buffer.from([0, 0, 0, 0, 7, 6, 0x6f]),
      /not Avro binary \(schema id 7\) of org\.acemq\.test\.OrderPlaced .*truncated buffer/,
    ],
  ])('refuses %s with a decode error that says why', (_what, body, reason) => {
    expectDecodeFailure(registered, body, reason)
  })

  it.each([
    [
      { schemas: { 7: schema }, writeSchemaId: 8 },
      /options\.writeSchemaId\) is 8, which options\.schemas does not hold \(it holds 7\)/,
    ],
    [
      { schemas: { 7: schema }, writeSchemaId: -1 },
      /options\.writeSchemaId\) must be a schema id, an integer from 0 to 4294967295; got -1/,
    ],
    [{ schemas: { 7: schema }, writeSchemaId: 2 ** 32 }, /must be a schema id/],
    [
      { schemas: new Map([['x', schema]]), writeSchemaId: 7 },
      /options\.schemas\) key must be a schema id.*got "x"/,
    ],
    [{ schemas: null, writeSchemaId: 7 }, /options\.schemas\) must map schema ids to schemas/],
  ])('refuses options %#, naming the option and the value', (options, message) => {
    expect(() => registeredAvroCodec(options as never)).toThrow(ConfigurationError)
    expect(() => registeredAvroCodec(options as never)).toThrow(message)
  })
})
