import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { expectDecodeFailure, samplesOf } from '../../../test-support/codec-samples.js'
import { yamlCodec } from '../src/index.js'

describe('yamlCodec', () => {
  it('writes and reads application/yaml, the family’s content type', () => {
    expect(yamlCodec.contentType).toBe('application/yaml')
    expect(samplesOf('yaml').map((sample) => sample.content_type)).toEqual([
      'application/yaml',
      'application/yaml',
    ])
  })

  it.each(samplesOf('yaml').map((sample) => [sample.producer, sample] as const))(
    'decodes the %s library’s sample to the expected value',
    (_producer, sample) => {
      expect(yamlCodec.decode(sample.body)).toEqual(sample.expected)
    },
  )

  it('reads back what it writes', () => {
    const [sample] = samplesOf('yaml')
    const value = { ...(sample?.expected as object), nested: { ok: true, at: null } }
    expect(yamlCodec.decode(yamlCodec.encode(value))).toEqual(value)
  })

  it('keeps the digits of an integer too large for a number', () => {
    expect(yamlCodec.decode(Buffer.from('id: 123456789012345678901\nn: 7\n'))).toEqual({
      id: 123456789012345678901n,
      n: 7,
    })
  })

  it.each([
    [
      'bytes that are not UTF-8',
      Buffer.from([0xff, 0xfe, 0x00]),
      /not UTF-8 text, so it is not YAML/,
    ],
    ['a broken flow sequence', Buffer.from('items: [a, b\n'), /not YAML: Flow sequence/],
    [
      'two documents',
      Buffer.from('a: 1\n---\nb: 2\n'),
      /not YAML: Source contains multiple documents/,
    ],
    ['a repeated key', Buffer.from('a: 1\na: 2\n'), /not YAML: Map keys must be unique/],
    ['an alias to nothing', Buffer.from('a: *nowhere\n'), /not YAML: .*alias/i],
  ])('refuses %s with a decode error that says why', (_what, body, reason) => {
    expectDecodeFailure(yamlCodec, body, reason)
  })

  it('refuses a body whose aliases would expand without bound', () => {
    const lines = ['a0: &a0 [x, x, x, x, x, x, x, x, x, x]']
    for (let i = 1; i < 12; i++)
      lines.push(
        `a${i}: &a${i} [${Array(10)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      )
    expect(() => yamlCodec.decode(Buffer.from(lines.join('\n')))).toThrow(/not YAML: .*alias/i)
  })

  it('refuses to encode undefined or a function, naming the payload', () => {
    expect(() => yamlCodec.encode(undefined)).toThrow(ConfigurationError)
    expect(() => yamlCodec.encode({ run: () => 1 })).toThrow(
      /payload \(a object\) cannot be encoded as YAML/,
    )
  })
})
