import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { bytesCodec, jsonCodec, textCodec } from '../../src/codec/codec.js'
import { AceMqError, ConfigurationError } from '../../src/errors.js'

const PNG = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00)
const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

function decodeError(run: () => unknown): AceMqError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(AceMqError)
    return error as AceMqError
  }
  throw new Error('expected the decode to throw')
}

describe('jsonCodec', () => {
  test('is application/json', () => {
    expect(jsonCodec.contentType).toBe('application/json')
  })

  test('writes compact UTF-8 JSON', () => {
    expect(new TextDecoder().decode(jsonCodec.encode({ id: 'o-1', note: 'crème' }))).toBe(
      '{"id":"o-1","note":"crème"}',
    )
  })

  test('reads back any JSON value it wrote', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(jsonCodec.decode(jsonCodec.encode(value))).toStrictEqual(
          JSON.parse(JSON.stringify(value)),
        )
      }),
    )
  })

  test('writes null, which is how to send "nothing"', () => {
    expect(jsonCodec.decode(jsonCodec.encode(null))).toBeNull()
  })

  test('refuses undefined, naming the payload', () => {
    expect(() => jsonCodec.encode(undefined)).toThrow(ConfigurationError)
    expect(() => jsonCodec.encode(undefined)).toThrow(/^payload cannot be undefined/)
  })

  test.each<[string, unknown]>([
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
  ])('refuses %s, which JSON cannot hold', (_name, value) => {
    expect(() => jsonCodec.encode(value)).toThrow(/^payload cannot be encoded as JSON: got a /)
  })

  test('refuses a bigint and a cycle with the reason, keeping the cause', () => {
    const cyclic: Record<string, unknown> = {}
    cyclic['self'] = cyclic
    for (const value of [{ amount: 10n }, cyclic]) {
      try {
        jsonCodec.encode(value)
        expect.unreachable()
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigurationError)
        expect((error as Error).message).toMatch(/^payload cannot be encoded as JSON: /)
        expect((error as Error).cause).toBeInstanceOf(TypeError)
      }
    }
  })

  test('an empty body is a clear decode error', () => {
    const error = decodeError(() => jsonCodec.decode(new Uint8Array()))
    expect(error.code).toBe('ACEMQ_DECODE')
    expect(error.message).toBe('the body is empty, and an empty body is not JSON')
  })

  test('a binary body is a clear decode error, not a crash', () => {
    const error = decodeError(() => jsonCodec.decode(PNG))
    expect(error.code).toBe('ACEMQ_DECODE')
    expect(error.message).toBe(
      'the body is not UTF-8 text, so it is not JSON (10 byte(s) starting 89 50 4e 47 0d 0a 1a 0a)',
    )
  })

  test('text that is not JSON is a decode error that keeps the parser’s reason', () => {
    const error = decodeError(() => jsonCodec.decode(utf8('{"id": ')))
    expect(error.code).toBe('ACEMQ_DECODE')
    expect(error.message).toMatch(/^the body is not valid JSON: /)
    expect(error.cause).toBeInstanceOf(SyntaxError)
  })

  test('reads a body that starts with a UTF-8 byte order mark', () => {
    expect(jsonCodec.decode(Uint8Array.of(0xef, 0xbb, 0xbf, ...utf8('[1]')))).toStrictEqual([1])
  })

  test('reads a Buffer body', () => {
    expect(jsonCodec.decode(Buffer.from('{"a":1}'))).toStrictEqual({ a: 1 })
  })

  test('is frozen', () => {
    expect(Object.isFrozen(jsonCodec)).toBe(true)
  })
})

describe('textCodec', () => {
  test('is text/plain', () => {
    expect(textCodec.contentType).toBe('text/plain')
  })

  test('reads back any string it wrote', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        expect(textCodec.decode(textCodec.encode(text))).toBe(text)
      }),
    )
  })

  test('reads an empty body as the empty string', () => {
    expect(textCodec.decode(new Uint8Array())).toBe('')
  })

  test('refuses a payload that is not a string', () => {
    expect(() => textCodec.encode(42 as unknown as string)).toThrow(ConfigurationError)
    expect(() => textCodec.encode(42 as unknown as string)).toThrow(
      'payload must be a string for text/plain; got a number',
    )
  })

  test('bytes that are not UTF-8 are a decode error, not replacement characters', () => {
    const error = decodeError(() => textCodec.decode(PNG))
    expect(error.code).toBe('ACEMQ_DECODE')
    expect(error.message).toMatch(/^the body is not UTF-8 text/)
  })
})

describe('bytesCodec', () => {
  test('is application/octet-stream', () => {
    expect(bytesCodec.contentType).toBe('application/octet-stream')
  })

  test('passes bytes through unchanged', () => {
    expect(bytesCodec.decode(bytesCodec.encode(PNG))).toStrictEqual(PNG)
    expect(bytesCodec.encode(Buffer.from('x'))).toStrictEqual(Buffer.from('x'))
  })

  test('reads an empty body as empty bytes', () => {
    expect(bytesCodec.decode(new Uint8Array())).toHaveLength(0)
  })

  test('refuses a payload that is not bytes', () => {
    expect(() => bytesCodec.encode('text' as unknown as Uint8Array)).toThrow(
      'payload must be a Uint8Array (or Buffer) for application/octet-stream; got a string',
    )
    expect(() => bytesCodec.encode([1, 2] as unknown as Uint8Array)).toThrow(/got an array$/)
  })
})
