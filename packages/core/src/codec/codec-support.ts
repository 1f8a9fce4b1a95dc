import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'

// `fatal`: bytes that are not UTF-8 are a decode failure, not text with replacement characters.
const decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * The length and first 8 bytes of a body, in hex: enough to recognise it in a parked message's
 * reason without copying the payload into logs.
 *
 * @example
 * ```ts
 * bodyPreview(Buffer.from('hello')) // '5 byte(s) starting 68 65 6c 6c 6f'
 * ```
 */
export function bodyPreview(body: Uint8Array): string {
  const head = Array.from(body.subarray(0, 8), (byte) => byte.toString(16).padStart(2, '0'))
  return `${body.length} byte(s) starting ${head.join(' ')}`
}

/**
 * The error a codec's `decode` throws for a body it cannot read: an {@link AceMqError} with code
 * `ACEMQ_DECODE`. The consumer parks the message with `could not decode: <message>`.
 *
 * @example
 * ```ts
 * throw decodeFailure('the body is not YAML: unexpected end of input', error)
 * ```
 */
export function decodeFailure(message: string, cause?: unknown): AceMqError {
  return new AceMqError(message, { code: ErrorCodes.DECODE, cause })
}

/**
 * A body as UTF-8 text, for codecs of text formats. Bytes that are not UTF-8 throw
 * {@link decodeFailure} naming `format` (`the body is not UTF-8 text, so it is not YAML …`).
 *
 * @example
 * ```ts
 * const text = utf8Body(body, 'YAML')
 * ```
 */
export function utf8Body(body: Uint8Array, format: string): string {
  try {
    return decoder.decode(body)
  } catch (error) {
    throw decodeFailure(
      `the body is not UTF-8 text, so it is not ${format} (${bodyPreview(body)})`,
      error,
    )
  }
}

/**
 * What kind of value a payload is, for an encode error: `null`, `an array`, `bytes`, or
 * `a <typeof>` (`a string`, `a number`, `a object`).
 *
 * @example
 * ```ts
 * throw new ConfigurationError(`payload must be an object for TOML; got ${payloadKind(value)}`)
 * ```
 */
export function payloadKind(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (value instanceof Uint8Array) return 'bytes'
  return `a ${typeof value}`
}
