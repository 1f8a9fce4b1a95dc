import { randomBytes } from 'node:crypto'
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  ENCRYPTED_CONTENT_TYPE,
  ErrorCodes,
  KeyRing,
  encryptedCodec,
  errorCodeOf,
  jsonCodec,
} from '../../src/index.js'

const key1 = randomBytes(32)
const key2 = randomBytes(32)

/** Every way a key could be printed. */
function keyForms(key: Buffer): string[] {
  return [
    key.toString('hex'),
    key.toString('base64'),
    key.toString('base64url'),
    key.toString('latin1'),
  ]
}

function failure(fn: () => unknown): Error {
  try {
    fn()
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a failure')
}

describe('encryptedCodec', () => {
  const codec = encryptedCodec({ inner: jsonCodec, keys: KeyRing.of({ k1: key1 }, 'k1') })

  it('frames the body as ae 01, key-id length, key id, 12-byte nonce, ciphertext, 16-byte tag', () => {
    const body = Buffer.from(codec.encode({ id: 'o-1' }))
    const plaintext = jsonCodec.encode({ id: 'o-1' })
    expect(codec.contentType).toBe(ENCRYPTED_CONTENT_TYPE)
    expect([...body.subarray(0, 3)]).toEqual([0xae, 0x01, 2])
    expect(body.toString('utf8', 3, 5)).toBe('k1')
    expect(body.length).toBe(5 + 12 + plaintext.length + 16)
    expect(body.includes(Buffer.from('o-1'))).toBe(false)
    expect(codec.decode(body)).toEqual({ id: 'o-1' })
  })

  it('never writes the same bytes twice for one payload (a fresh nonce each time)', () => {
    expect(Buffer.from(codec.encode('x')).equals(Buffer.from(codec.encode('x')))).toBe(false)
  })

  it('decrypts with any key in the ring after a rotation', () => {
    const before = codec.encode({ id: 'o-2' })
    const rotated = encryptedCodec({
      inner: jsonCodec,
      keys: KeyRing.of({ k1: key1 }, 'k1').with('k2', key2, true),
    })
    expect(rotated.decode(before)).toEqual({ id: 'o-2' })
    expect(Buffer.from(rotated.encode('y')).toString('utf8', 3, 5)).toBe('k2')
  })

  it('refuses a body under a key id the ring does not hold, naming the id', () => {
    const other = encryptedCodec({ inner: jsonCodec, keys: KeyRing.of({ k2: key2 }, 'k2') })
    const error = failure(() => other.decode(codec.encode('x')))
    expect(errorCodeOf(error)).toBe(ErrorCodes.DECODE)
    expect(error.message).toBe(
      "the body is encrypted under key 'k1', which the key ring does not hold (it holds k2)",
    )
  })

  it('refuses a body under the wrong key of the same id, naming the id and never a key', () => {
    const wrong = encryptedCodec({ inner: jsonCodec, keys: KeyRing.of({ k1: key2 }, 'k1') })
    const error = failure(() => wrong.decode(codec.encode('x')))
    expect(errorCodeOf(error)).toBe(ErrorCodes.DECODE)
    expect(error.message).toContain("under key 'k1' does not authenticate")
    const printed = `${error.message} ${inspect(error)} ${JSON.stringify(error)}`
    for (const form of [...keyForms(key1), ...keyForms(key2)]) expect(printed).not.toContain(form)
  })

  it('refuses a tampered body', () => {
    const body = Buffer.from(codec.encode({ amount: 10 }))
    body[body.length - 20] = (body[body.length - 20] as number) ^ 1
    expect(failure(() => codec.decode(body)).message).toContain('or the body was altered')
  })

  it('refuses a body that is not encrypted, or is cut short', () => {
    expect(failure(() => codec.decode(Buffer.from('{"a":1}'))).message).toBe(
      'the body is not an AceMQ encrypted body (expected ae 01, got 7b 22)',
    )
    expect(failure(() => codec.decode(Buffer.from([0xae, 0x01, 2, 0x6b]))).message).toBe(
      'the encrypted body is truncated (4 byte(s))',
    )
    expect(errorCodeOf(failure(() => codec.decode(new Uint8Array())))).toBe(ErrorCodes.DECODE)
  })

  it('refuses to encrypt with a ring that has no current key, and still decrypts with it', () => {
    const decryptOnly = encryptedCodec({ inner: jsonCodec, keys: KeyRing.of({ k1: key1 }) })
    const error = failure(() => decryptOnly.encode('x'))
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error.message).toContain('the key ring has no current key to encrypt with (it holds k1)')
    expect(decryptOnly.decode(codec.encode('z'))).toBe('z')
  })

  it('reads the ring of the moment when given a function, so keys rotate without a restart', () => {
    let ring = KeyRing.of({ k1: key1 }, 'k1')
    const live = encryptedCodec({ inner: jsonCodec, keys: () => ring })
    const before = live.encode('a')
    ring = ring.with('k2', key2, true).without('k1')
    expect(failure(() => live.decode(before)).message).toContain("under key 'k1'")
    expect(Buffer.from(live.encode('b')).toString('utf8', 3, 5)).toBe('k2')
  })
})

describe('KeyRing', () => {
  it('shows ids and never keys in its JSON and its inspection', () => {
    const ring = KeyRing.of({ k1: key1, k2: key2 }, 'k2')
    const shown = `${JSON.stringify(ring)} ${inspect(ring)} ${String(ring)}`
    expect(JSON.stringify(ring)).toBe('{"currentId":"k2","ids":["k1","k2"]}')
    for (const form of [...keyForms(key1), ...keyForms(key2)]) expect(shown).not.toContain(form)
  })

  it('refuses a key that is not 32 bytes, naming the id and the length only', () => {
    const short = randomBytes(16)
    const error = failure(() => KeyRing.of({ k1: short }, 'k1'))
    expect(error.message).toBe("KeyRing key 'k1' must be 32 bytes (AES-256); got 16 byte(s)")
  })

  it('refuses no keys, a bad id and a current id it does not hold', () => {
    expect(() => KeyRing.of({})).toThrow(/at least one key/)
    expect(() => KeyRing.of({ ['x'.repeat(256)]: key1 })).toThrow(/1 to 255 UTF-8 bytes/)
    expect(() => KeyRing.of({ k1: key1 }, 'k9')).toThrow(/one of the ring's ids \(k1\); got "k9"/)
    expect(() => KeyRing.of({ k1: key1 }).without('k1')).toThrow(/empty/)
  })
})
