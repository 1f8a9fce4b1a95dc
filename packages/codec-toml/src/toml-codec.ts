import { ConfigurationError, type Codec } from '@acemq/core'
import { decodeFailure, describeError, payloadKind, utf8Body } from '@acemq/core/spi'
import { parse, stringify } from 'smol-toml'

// TOML has no null: a key holding one would vanish from the body without a word, so encoding
// refuses it and names where it is.
function assertNoNull(value: unknown, path: string): void {
  if (value === null || value === undefined) {
    throw new ConfigurationError(
      `payload${path} is ${String(value)}, and TOML has no null: leave the key out or send a value`,
    )
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => assertNoNull(item, `${path}[${index}]`))
  } else if (typeof value === 'object' && !(value instanceof Date)) {
    for (const [key, item] of Object.entries(value)) assertNoNull(item, `${path}.${key}`)
  }
}

/**
 * `application/toml` (TOML 1.0, UTF-8), as the Java and Go AceMQ libraries write it. A body is a
 * table, so the payload is an object. Decoding a body that is not UTF-8 or not TOML (a value
 * defined twice, a missing value) throws an `AceMqError` with code `ACEMQ_DECODE`; the consumer
 * parks the message with the reason. Encoding anything but an object, or an object holding
 * `null` or `undefined` anywhere (TOML has no null), throws a `ConfigurationError`.
 *
 * @example
 * ```ts
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(tomlCodec) })
 * await mq.publisher('', 'orders', { contentType: 'application/toml' }).send({ id: 'o-1' })
 * ```
 */
export const tomlCodec: Codec<Record<string, unknown>> = Object.freeze({
  contentType: 'application/toml',
  encode(value: Record<string, unknown>): Uint8Array {
    const payload: unknown = value
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw new ConfigurationError(
        `payload must be an object for application/toml (a TOML body is a table); got ${payloadKind(payload)}`,
      )
    }
    assertNoNull(payload, '')
    try {
      return Buffer.from(stringify(payload), 'utf8')
    } catch (error) {
      throw new ConfigurationError(`payload cannot be encoded as TOML: ${describeError(error)}`, {
        cause: error,
      })
    }
  },
  decode(body: Uint8Array): Record<string, unknown> {
    const text = utf8Body(body, 'TOML')
    try {
      // Integers beyond 2^53 - 1 keep their digits as bigint; all others are numbers.
      return parse(text, { integersAsBigInt: 'asNeeded' })
    } catch (error) {
      // smol-toml quotes the source under its first line; a parked message's reason is one line.
      const [first] = describeError(error).split('\n', 1)
      throw decodeFailure(`the body is not TOML: ${first ?? ''}`, error)
    }
  },
})
