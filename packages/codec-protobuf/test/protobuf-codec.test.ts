import protobuf from 'protobufjs'
import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import {
  codecSamples,
  expectDecodeFailure,
  samplesOf,
} from '../../../test-support/codec-samples.js'
import { protobufCodec } from '../src/index.js'

const orders = protobufCodec({
  schema: codecSamples.proto_schema,
  messageType: 'acemq.test.OrderPlaced',
})

const WIDER = `syntax = "proto3"; package acemq.wide;
message Line { string sku = 1; uint64 quantity = 2; }
message Order { string id = 1; int64 total = 2; repeated Line lines = 3; map<string, string> tags = 4; bytes blob = 5; bool paid = 6; }`
const wide = protobufCodec({ schema: WIDER, messageType: 'acemq.wide.Order' })

describe('protobufCodec', () => {
  it('writes and reads application/x-protobuf, the family’s content type', () => {
    expect(orders.contentType).toBe('application/x-protobuf')
    expect(new Set(samplesOf('protobuf').map((sample) => sample.content_type))).toEqual(
      new Set(['application/x-protobuf']),
    )
  })

  it.each(samplesOf('protobuf').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample to the expected value, field names as in the .proto',
    (_producer, sample) => {
      expect({ ...orders.decode(sample.body) }).toStrictEqual(sample.expected)
    },
  )

  it.each(samplesOf('protobuf').map((sample) => [sample.producer, sample] as const))(
    'writes the %s library’s bytes for the same value',
    (_producer, sample) => {
      expect(Buffer.from(orders.encode(sample.expected as Record<string, unknown>))).toEqual(
        Buffer.from(sample.body),
      )
    },
  )

  it('reads back what it writes: nested and repeated messages, maps, bytes and 64-bit integers', () => {
    const value = {
      id: 'o-9',
      total: 123_456_789_012_345_678n,
      lines: [
        { sku: 'widget', quantity: 2 },
        { sku: 'gasket', quantity: 18_446_744_073_709_551_615n },
      ],
      tags: { tenant: 'acme' },
      blob: Buffer.from([1, 2, 3]),
      paid: true,
    }
    const decoded = JSON.parse(
      JSON.stringify(wide.decode(wide.encode(value)), (_k, v: unknown) =>
        typeof v === 'bigint' ? `${v}n` : v,
      ),
    )
    expect(decoded).toEqual(
      JSON.parse(JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))),
    )
  })

  it('reads an empty body as the message with every field at its default', () => {
    expect({ ...orders.decode(new Uint8Array()) }).toStrictEqual({
      order_id: '',
      total_cents: 0,
      tenant: '',
    })
  })

  it('takes a protobufjs Root as the schema', () => {
    const root = protobuf.parse(codecSamples.proto_schema, { keepCase: true }).root
    const codec = protobufCodec({ schema: root, messageType: 'acemq.test.OrderPlaced' })
    const [sample] = samplesOf('protobuf')
    expect({ ...codec.decode(sample?.body ?? new Uint8Array()) }).toStrictEqual(sample?.expected)
  })

  it.each([
    [
      'text',
      Buffer.from('not protobuf'),
      /not a protobuf acemq\.test\.OrderPlaced \(12 byte\(s\)\): invalid wire type 6 at offset 1/,
    ],
    [
      'a length past the end',
      Buffer.from([0x0a, 0x05, 0x61, 0x62]),
      /not a protobuf acemq\.test\.OrderPlaced .*index out of range/,
    ],
    ['a truncated varint', Buffer.from([0x10, 0xff]), /not a protobuf acemq\.test\.OrderPlaced/],
  ])('refuses %s with a decode error that says why', (_what, body, reason) => {
    expectDecodeFailure(orders, body, reason)
  })

  it('refuses to encode a key that is no field, instead of leaving it out', () => {
    expect(() => orders.encode({ order_id: 'o-1', orderId: 'o-1' })).toThrow(
      /payload\.orderId is not a field of acemq\.test\.OrderPlaced \(its fields: order_id, total_cents, tenant\)/,
    )
    expect(() => wide.encode({ lines: [{ sku: 'a', qty: 1 }] })).toThrow(
      /payload\.lines\[0\]\.qty is not a field of acemq\.wide\.Line/,
    )
  })

  it('refuses to encode a value of the wrong type, naming the field', () => {
    expect(() => orders.encode({ order_id: 7 })).toThrow(ConfigurationError)
    expect(() => orders.encode({ order_id: 7 })).toThrow(
      /payload does not fit acemq\.test\.OrderPlaced: order_id: string expected/,
    )
    expect(() => orders.encode('o-1' as never)).toThrow(/payload must be an object .*got a string/)
  })

  it.each([
    [{ schema: 'message {', messageType: 'X' }, /options\.schema\) is not a valid \.proto source/],
    [
      { schema: 42, messageType: 'X' },
      /options\.schema\) must be \.proto source text or a protobufjs Root; got a number/,
    ],
    [
      { schema: codecSamples.proto_schema, messageType: 'acemq.test.Missing' },
      /options\.messageType\) is 'acemq\.test\.Missing', which the schema does not define/,
    ],
    [
      { schema: codecSamples.proto_schema, messageType: '' },
      /options\.messageType\) must name a message/,
    ],
  ])('refuses options %#, naming the option and the value', (options, message) => {
    expect(() => protobufCodec(options as never)).toThrow(ConfigurationError)
    expect(() => protobufCodec(options as never)).toThrow(message)
  })
})
