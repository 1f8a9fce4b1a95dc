import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { expectDecodeFailure, samplesOf } from '../../../test-support/codec-samples.js'
import { tomlCodec } from '../src/index.js'

describe('tomlCodec', () => {
  it('writes and reads application/toml, the family’s content type', () => {
    expect(tomlCodec.contentType).toBe('application/toml')
    expect(new Set(samplesOf('toml').map((sample) => sample.content_type))).toEqual(
      new Set(['application/toml']),
    )
  })

  it.each(samplesOf('toml').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample to the expected value',
    (_producer, sample) => {
      expect({ ...tomlCodec.decode(sample.body) }).toStrictEqual(sample.expected)
    },
  )

  it('reads back what it writes, nested tables and floats included', () => {
    const value = {
      orderId: 'o-1',
      totalCents: 4250,
      ratio: 0.25,
      paid: true,
      items: ['widget', 'gasket'],
      address: { city: 'Malmö', lines: ['Storgatan 1'] },
    }
    expect(JSON.parse(JSON.stringify(tomlCodec.decode(tomlCodec.encode(value))))).toEqual(value)
  })

  it('keeps the digits of an integer too large for a number', () => {
    expect(tomlCodec.decode(Buffer.from('id = 123456789012345678901\nn = 7\n'))).toEqual({
      id: 123456789012345678901n,
      n: 7,
    })
  })

  it.each([
    ['bytes that are not UTF-8', Buffer.from([0xc3, 0x28]), /not UTF-8 text, so it is not TOML/],
    [
      'a key defined twice',
      Buffer.from('a = 1\na = 2\n'),
      /not TOML: Invalid TOML document: trying to redefine/,
    ],
    [
      'a key without a value',
      Buffer.from('a = \n'),
      /not TOML: Invalid TOML document: invalid value/,
    ],
    ['JSON', Buffer.from('{"orderId":"o-1"}'), /not TOML: /],
  ])('refuses %s with a decode error that says why, on one line', (_what, body, reason) => {
    expectDecodeFailure(tomlCodec, body, reason)
  })

  it('refuses to encode what is not a table', () => {
    expect(() => tomlCodec.encode(['a'] as never)).toThrow(
      /payload must be an object for application\/toml .*got an array/,
    )
    expect(() => tomlCodec.encode('a' as never)).toThrow(ConfigurationError)
  })

  it('refuses to encode a null, naming where it is, instead of dropping the key', () => {
    expect(() => tomlCodec.encode({ order: { note: null } })).toThrow(
      /payload\.order\.note is null, and TOML has no null/,
    )
    expect(() => tomlCodec.encode({ items: ['a', undefined] })).toThrow(
      /payload\.items\[1\] is undefined/,
    )
  })
})
