import { AceMqError, ConfigurationError, describeError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { payloadKind, utf8Body } from './codec-support.js'

/**
 * Turns payloads into message bodies and back, for one content type. `decode` throws on a body
 * it cannot read; the consumer then parks the message with `could not decode: <message>`.
 *
 * @example
 * ```ts
 * const csv: Codec<string[][]> = {
 *   contentType: 'text/csv',
 *   encode: (rows) => new TextEncoder().encode(rows.map((r) => r.join(',')).join('\n')),
 *   decode: (body) => new TextDecoder().decode(body).split('\n').map((l) => l.split(',')),
 * }
 * ```
 */
export interface Codec<T = unknown> {
  /** The media type this codec writes and reads, without parameters: `application/json`. */
  readonly contentType: string
  encode(value: T): Uint8Array
  decode(body: Uint8Array): T
  /**
   * When present, what a publisher encodes with instead of `encode`: for a codec that must
   * reach something asynchronous (a claim-check store). Optional.
   */
  encodeAsync?(value: T): Promise<Uint8Array>
  /**
   * When present, what the consumer decodes with instead of `decode`. A failure with code
   * `ACEMQ_DECODE` parks the message; any other failure (a store that did not answer) is a
   * failure to retry. Optional.
   */
  decodeAsync?(body: Uint8Array): Promise<T>
}

const encoder = new TextEncoder()

const DECODE = ErrorCodes.DECODE

/**
 * `application/json` in UTF-8, the default codec. Encoding `undefined`, a function or a symbol
 * throws a {@link ConfigurationError} (JSON has no such value; send `null` for "nothing"), as
 * does a value `JSON.stringify` refuses (a `bigint`, a cycle). Decoding an empty body, bytes
 * that are not UTF-8, or text that is not JSON throws an {@link AceMqError} with code
 * `ACEMQ_DECODE`.
 *
 * @example
 * ```ts
 * jsonCodec.decode(jsonCodec.encode({ id: 'o-1' })) // { id: 'o-1' }
 * ```
 */
export const jsonCodec: Codec<unknown> = Object.freeze({
  contentType: 'application/json',
  encode(value: unknown): Uint8Array {
    if (value === undefined) {
      throw new ConfigurationError(
        "payload cannot be undefined: JSON has no undefined (send null to mean 'nothing')",
      )
    }
    let text: string | undefined
    try {
      text = JSON.stringify(value)
    } catch (error) {
      throw new ConfigurationError(`payload cannot be encoded as JSON: ${describeError(error)}`, {
        cause: error,
      })
    }
    if (text === undefined) {
      throw new ConfigurationError(`payload cannot be encoded as JSON: got ${payloadKind(value)}`)
    }
    // A Buffer is a Uint8Array; transports that want a Buffer then need no copy.
    return Buffer.from(text, 'utf8')
  },
  decode(body: Uint8Array): unknown {
    if (body.length === 0) {
      throw new AceMqError('the body is empty, and an empty body is not JSON', { code: DECODE })
    }
    const text = utf8Body(body, 'JSON')
    try {
      return JSON.parse(text) as unknown
    } catch (error) {
      throw new AceMqError(`the body is not valid JSON: ${describeError(error)}`, {
        code: DECODE,
        cause: error,
      })
    }
  },
})

/**
 * `text/plain` in UTF-8: strings in, strings out. Encoding anything but a string throws a
 * {@link ConfigurationError}; decoding bytes that are not UTF-8 throws an {@link AceMqError}
 * with code `ACEMQ_DECODE`. An empty body is the empty string.
 *
 * @example
 * ```ts
 * textCodec.decode(textCodec.encode('hello')) // 'hello'
 * ```
 */
export const textCodec: Codec<string> = Object.freeze({
  contentType: 'text/plain',
  encode(value: string): Uint8Array {
    if (typeof value !== 'string') {
      throw new ConfigurationError(
        `payload must be a string for text/plain; got ${payloadKind(value as unknown)}`,
      )
    }
    return encoder.encode(value)
  },
  decode(body: Uint8Array): string {
    return utf8Body(body, 'text')
  },
})

/**
 * `application/octet-stream`: the body as it is. Encoding anything but a `Uint8Array` (a
 * `Buffer` is one) throws a {@link ConfigurationError}.
 *
 * @example
 * ```ts
 * bytesCodec.decode(bytesCodec.encode(Buffer.from([1, 2, 3]))) // the same bytes
 * ```
 */
export const bytesCodec: Codec<Uint8Array> = Object.freeze({
  contentType: 'application/octet-stream',
  encode(value: Uint8Array): Uint8Array {
    if (!(value instanceof Uint8Array)) {
      throw new ConfigurationError(
        `payload must be a Uint8Array (or Buffer) for application/octet-stream; got ${payloadKind(value as unknown)}`,
      )
    }
    return value
  },
  decode(body: Uint8Array): Uint8Array {
    return body
  },
})
