import { describe, expect, test } from 'vitest'
import { bytesCodec, jsonCodec, textCodec, type Codec } from '../../src/codec/codec.js'
import { CodecRegistry } from '../../src/codec/codec-registry.js'
import { ConfigurationError } from '../../src/errors.js'

const csv: Codec<string[][]> = {
  contentType: 'text/csv',
  encode: (rows) => new TextEncoder().encode(rows.map((row) => row.join(',')).join('\n')),
  decode: (body) =>
    new TextDecoder()
      .decode(body)
      .split('\n')
      .map((line) => line.split(',')),
}

const otherJson: Codec = { ...jsonCodec, contentType: 'application/json' }

describe('CodecRegistry.defaults', () => {
  const codecs = CodecRegistry.defaults()

  test.each<[string | undefined, Codec]>([
    ['application/json', jsonCodec],
    ['text/plain', textCodec],
    ['application/octet-stream', bytesCodec],
  ])('finds the codec for %s', (type, codec) => {
    expect(codecs.find(type)).toBe(codec)
  })

  test.each([undefined, '', '  '])('reads a message with content type %j as JSON', (type) => {
    expect(codecs.find(type)).toBe(jsonCodec)
  })

  test.each([
    'application/json; charset=utf-8',
    'Application/JSON',
    ' APPLICATION/JSON ;charset=UTF-8',
  ])('ignores parameters and letter case (%s)', (type) => {
    expect(codecs.find(type)).toBe(jsonCodec)
  })

  test('ignores parameters for text too', () => {
    expect(codecs.find('text/plain; charset=utf-8')).toBe(textCodec)
  })

  test.each(['application/vnd.acme.order+json', 'application/problem+json; charset=utf-8'])(
    'reads the +json type %s as JSON',
    (type) => {
      expect(codecs.find(type)).toBe(jsonCodec)
    },
  )

  test.each(['application/xml', 'text/csv', 'image/png', 'json', 'application/json+xml'])(
    'has no codec for %s',
    (type) => {
      expect(codecs.find(type)).toBeUndefined()
    },
  )

  test('its default codec is JSON', () => {
    expect(codecs.defaultCodec).toBe(jsonCodec)
  })

  test('lists its content types', () => {
    expect(codecs.contentTypes).toStrictEqual([
      'application/json',
      'text/plain',
      'application/octet-stream',
    ])
  })
})

describe('CodecRegistry.with', () => {
  test('adds a codec in a new registry, leaving the original as it was', () => {
    const base = CodecRegistry.defaults()
    const extended = base.with(csv)
    expect(extended).not.toBe(base)
    expect(extended.find('text/csv; header=present')).toBe(csv)
    expect(base.find('text/csv')).toBeUndefined()
  })

  test('registries are frozen', () => {
    expect(Object.isFrozen(CodecRegistry.defaults())).toBe(true)
    expect(Object.isFrozen(CodecRegistry.defaults().with(csv))).toBe(true)
  })

  test('the later codec for a content type wins', () => {
    const replacement: Codec<string> = { ...textCodec, contentType: 'TEXT/PLAIN; charset=utf-8' }
    expect(CodecRegistry.defaults().with(replacement).find('text/plain')).toBe(replacement)
  })

  test('replacing JSON replaces the default and the +json fallback too', () => {
    const codecs = CodecRegistry.defaults().with(otherJson)
    expect(codecs.defaultCodec).toBe(otherJson)
    expect(codecs.find(undefined)).toBe(otherJson)
    expect(codecs.find('application/vnd.acme+json')).toBe(otherJson)
  })

  test('a +json type with a codec of its own uses it', () => {
    const own: Codec = { ...jsonCodec, contentType: 'application/vnd.acme+json' }
    expect(CodecRegistry.defaults().with(own).find('application/vnd.acme+json')).toBe(own)
  })

  test.each<[string, unknown, RegExp]>([
    ['no content type', { ...csv, contentType: '' }, /^codec\.contentType must be a media type/],
    ['a content type that is only parameters', { ...csv, contentType: ';x=1' }, /contentType/],
    ['a content type that is not a string', { ...csv, contentType: 3 }, /got 3$/],
    [
      'no decode',
      { contentType: 'a/b', encode: csv.encode },
      /must have encode\(value\) and decode/,
    ],
    ['nothing at all', null, /^codec must be an object/],
  ])('refuses a codec with %s', (_name, codec, message) => {
    const add = (): CodecRegistry => CodecRegistry.defaults().with(codec as Codec)
    expect(add).toThrow(ConfigurationError)
    expect(add).toThrow(message)
  })
})
