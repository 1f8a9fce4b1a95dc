import { ConfigurationError, type Codec } from '@acemq/core'
import { decodeFailure, describeError, payloadKind, utf8Body } from '@acemq/core/spi'
import { parseDocument, stringify } from 'yaml'

/**
 * How many times one YAML document may use an alias (`*anchor`). An alias can stand for a whole
 * tree, so a small body that nests them ("billion laughs") would otherwise decode to gigabytes.
 */
export const DEFAULT_MAX_ALIAS_COUNT = 100

// Integers beyond 2^53 - 1 are read as bigint, then turned back into numbers when that loses
// nothing: 4250 stays a number, 123456789012345678901 keeps its digits.
function safeInteger(_key: unknown, value: unknown): unknown {
  if (typeof value !== 'bigint') return value
  const number = Number(value)
  return Number.isSafeInteger(number) ? number : value
}

/**
 * `application/yaml` (YAML 1.2, UTF-8), as the Java and Go AceMQ libraries write it: one
 * document per body. Decoding a body that is not UTF-8, holds more than one document, repeats a
 * key, does not parse, or uses more than {@link DEFAULT_MAX_ALIAS_COUNT} aliases throws an
 * `AceMqError` with code `ACEMQ_DECODE`; the consumer parks the message with the reason. An
 * empty body is `null`. Encoding `undefined` or a value YAML has no form for (a function, a
 * symbol) throws a `ConfigurationError`.
 *
 * @example
 * ```ts
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(yamlCodec) })
 * await mq.publisher('', 'orders', { contentType: 'application/yaml' }).send({ id: 'o-1' })
 * ```
 */
export const yamlCodec: Codec<unknown> = Object.freeze({
  contentType: 'application/yaml',
  encode(value: unknown): Uint8Array {
    if (value === undefined) {
      throw new ConfigurationError(
        "payload cannot be undefined: YAML has no undefined (send null to mean 'nothing')",
      )
    }
    let text: string
    try {
      text = stringify(value)
    } catch (error) {
      throw new ConfigurationError(
        `payload (${payloadKind(value)}) cannot be encoded as YAML: ${describeError(error)}`,
        { cause: error },
      )
    }
    return Buffer.from(text, 'utf8')
  },
  decode(body: Uint8Array): unknown {
    const text = utf8Body(body, 'YAML')
    const document = parseDocument(text, { uniqueKeys: true, intAsBigInt: true })
    const [first] = document.errors
    if (first !== undefined) {
      throw decodeFailure(`the body is not YAML: ${oneLine(first.message)}`, first)
    }
    try {
      return document.toJS({ maxAliasCount: DEFAULT_MAX_ALIAS_COUNT, reviver: safeInteger })
    } catch (error) {
      throw decodeFailure(`the body is not YAML: ${oneLine(describeError(error))}`, error)
    }
  },
})

// The parser's messages quote the source over several lines; a parked message's reason is one.
function oneLine(message: string): string {
  return message.split('\n', 1)[0] ?? message
}
