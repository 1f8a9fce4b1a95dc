import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { AceMqError, ConfigurationError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { Codec } from './codec.js'
import type { KeyRing } from './key-ring.js'

/** The family's content type for an encrypted body (docs/design.md §26). */
export const ENCRYPTED_CONTENT_TYPE = 'application/vnd.acemq.encrypted'

const MAGIC = 0xae
const VERSION = 0x01
const NONCE_LENGTH = 12
const TAG_LENGTH = 16
const ALGORITHM = 'aes-256-gcm'

/** Options of {@link encryptedCodec}. */
export interface EncryptedCodecOptions<T> {
  /** The codec of the plaintext: the payload is encoded with it, then encrypted. */
  readonly inner: Codec<T>
  /** The keys, or a function answering the ring of the moment (so keys rotate without a restart). */
  readonly keys: KeyRing | (() => KeyRing)
}

function decodeError(message: string): AceMqError {
  return new AceMqError(message, { code: ErrorCodes.DECODE })
}

/**
 * A codec that encrypts what `inner` encodes with AES-256-GCM (`node:crypto`), content type
 * `application/vnd.acemq.encrypted`, in the family's framing: `0xAE 0x01`, the key id's length
 * (one byte), the key id (UTF-8), a 12-byte random nonce, the ciphertext, the 16-byte tag.
 * It encrypts with the ring's current key and decrypts with any key in the ring. A body under a
 * key the ring does not hold, under the wrong key, or tampered with does not decode: the
 * consumer parks it with a reason naming the key id, never the key.
 *
 * @example
 * ```ts
 * const keys = KeyRing.of({ k1: key1 }, 'k1')
 * const codecs = CodecRegistry.defaults().with(encryptedCodec({ inner: jsonCodec, keys }))
 * const mq = await AceMq.connect(transport, { codecs })
 * await mq.publisher('', 'payroll', { contentType: ENCRYPTED_CONTENT_TYPE }).send(salary)
 * ```
 */
export function encryptedCodec<T>(options: EncryptedCodecOptions<T>): Codec<T> {
  const { inner, keys } = options ?? ({} as Partial<EncryptedCodecOptions<T>>)
  if (typeof inner?.encode !== 'function' || typeof inner.decode !== 'function') {
    throw new ConfigurationError(
      `encryptedCodec(options.inner) must be a codec with encode and decode; got ${String(inner)}`,
    )
  }
  const ring = typeof keys === 'function' ? keys : () => keys
  if (typeof ring() !== 'object' || typeof ring()?.keyFor !== 'function') {
    throw new ConfigurationError(
      'encryptedCodec(options.keys) must be a KeyRing or a function answering one',
    )
  }
  return Object.freeze({
    contentType: ENCRYPTED_CONTENT_TYPE,
    encode(value: T): Uint8Array {
      const current = ring()
      const id = current.currentId
      const key = id === undefined ? undefined : current.keyFor(id)
      if (id === undefined || key === undefined) {
        throw new ConfigurationError(
          `the key ring has no current key to encrypt with (it holds ${current.ids.join(', ')}): make one current with KeyRing.of(keys, current)`,
        )
      }
      const plaintext = inner.encode(value)
      const idBytes = Buffer.from(id, 'utf8')
      const nonce = randomBytes(NONCE_LENGTH)
      const cipher = createCipheriv(ALGORITHM, key, nonce, { authTagLength: TAG_LENGTH })
      const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()])
      return Buffer.concat([
        Buffer.from([MAGIC, VERSION, idBytes.length]),
        idBytes,
        nonce,
        ciphertext,
        cipher.getAuthTag(),
      ])
    },
    decode(body: Uint8Array): T {
      if (body.length < 3 || body[0] !== MAGIC || body[1] !== VERSION) {
        const head = Array.from(body.subarray(0, 2), (b) => b.toString(16).padStart(2, '0'))
        throw decodeError(
          `the body is not an AceMQ encrypted body (expected ae 01, got ${head.join(' ') || 'nothing'})`,
        )
      }
      const idLength = body[2] as number
      const nonceStart = 3 + idLength
      if (body.length < nonceStart + NONCE_LENGTH + TAG_LENGTH) {
        throw decodeError(`the encrypted body is truncated (${body.length} byte(s))`)
      }
      const bytes = Buffer.from(body.buffer, body.byteOffset, body.length)
      const id = bytes.toString('utf8', 3, nonceStart)
      const current = ring()
      const key = current.keyFor(id)
      if (key === undefined) {
        throw decodeError(
          `the body is encrypted under key '${id}', which the key ring does not hold (it holds ${current.ids.join(', ')})`,
        )
      }
      const nonce = bytes.subarray(nonceStart, nonceStart + NONCE_LENGTH)
      const tag = bytes.subarray(bytes.length - TAG_LENGTH)
      const ciphertext = bytes.subarray(nonceStart + NONCE_LENGTH, bytes.length - TAG_LENGTH)
      let plaintext: Buffer
      try {
        const decipher = createDecipheriv(ALGORITHM, key, nonce, { authTagLength: TAG_LENGTH })
        decipher.setAuthTag(tag)
        plaintext = Buffer.concat([decipher.update(ciphertext), decipher.final()])
      } catch {
        // The cause is node's "Unsupported state or unable to authenticate data": nothing more
        // to say, and nothing that could carry the key.
        throw decodeError(
          `the body encrypted under key '${id}' does not authenticate: the key under that id is not the one it was encrypted with, or the body was altered`,
        )
      }
      return inner.decode(plaintext)
    },
  })
}
