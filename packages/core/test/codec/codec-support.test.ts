import { describe, expect, it } from 'vitest'
import { AceMqError, ErrorCodes } from '../../src/index.js'
import { bodyPreview, decodeFailure, payloadKind, utf8Body } from '../../src/spi.js'

describe('the helpers codec packages share (@acemq/core/spi)', () => {
  it('bodyPreview gives the length and at most the first 8 bytes in hex', () => {
    expect(bodyPreview(Buffer.from('hello, world'))).toBe(
      '12 byte(s) starting 68 65 6c 6c 6f 2c 20 77',
    )
    expect(bodyPreview(new Uint8Array())).toBe('0 byte(s) starting ')
  })

  it('decodeFailure is an AceMqError with code ACEMQ_DECODE and its cause', () => {
    const cause = new Error('underneath')
    const error = decodeFailure('the body is not YAML: x', cause)
    expect(error).toBeInstanceOf(AceMqError)
    expect(error).toMatchObject({
      code: ErrorCodes.DECODE,
      message: 'the body is not YAML: x',
      cause,
    })
  })

  it('utf8Body reads UTF-8 and refuses other bytes naming the format', () => {
    expect(utf8Body(Buffer.from('Söderström'), 'TOML')).toBe('Söderström')
    expect(() => utf8Body(Buffer.from([0xff, 0x41]), 'TOML')).toThrow(
      'the body is not UTF-8 text, so it is not TOML (2 byte(s) starting ff 41)',
    )
  })

  it('payloadKind names the kind of a payload', () => {
    expect([null, [1], Buffer.from('x'), 'a', 1, undefined, {}].map(payloadKind)).toEqual([
      'null',
      'an array',
      'bytes',
      'a string',
      'a number',
      'a undefined',
      'a object',
    ])
  })
})
