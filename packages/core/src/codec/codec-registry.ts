import { ConfigurationError } from '../errors.js'
import { bytesCodec, jsonCodec, textCodec, type Codec } from './codec.js'

const JSON_TYPE = 'application/json'
// RFC 6839 structured syntax suffix: `application/vnd.acme.order+json` is JSON.
const JSON_SUFFIX = /^application\/[^/\s]+\+json$/

// Media types compare without parameters and without case (RFC 9110 §8.3.1).
function mediaType(contentType: string): string {
  const semicolon = contentType.indexOf(';')
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
}

/**
 * The codecs a connection knows, by content type. Immutable: {@link CodecRegistry.with}
 * returns a new registry. A message without a content type is JSON, the default.
 *
 * @example
 * ```ts
 * const codecs = CodecRegistry.defaults().with(csvCodec)
 * codecs.find('text/csv; charset=utf-8') // csvCodec
 * codecs.find(undefined)                  // jsonCodec
 * ```
 */
export class CodecRegistry {
  readonly #codecs: ReadonlyMap<string, Codec>

  private constructor(codecs: ReadonlyMap<string, Codec>) {
    this.#codecs = codecs
    Object.freeze(this)
  }

  /**
   * JSON (`application/json`, also the default), text (`text/plain`) and bytes
   * (`application/octet-stream`).
   *
   * @example
   * ```ts
   * CodecRegistry.defaults().find('text/plain') // textCodec
   * ```
   */
  static defaults(): CodecRegistry {
    return new CodecRegistry(
      new Map<string, Codec>([
        [JSON_TYPE, jsonCodec],
        [textCodec.contentType, textCodec as Codec],
        [bytesCodec.contentType, bytesCodec as Codec],
      ]),
    )
  }

  /**
   * A new registry with `codec` added; it replaces any codec already registered for the same
   * media type (so registering `application/json` also changes the default). Throws a
   * {@link ConfigurationError} for a codec without a content type or without
   * `encode`/`decode`.
   *
   * @example
   * ```ts
   * const codecs = CodecRegistry.defaults().with(myJsonWithDates) // replaces JSON
   * ```
   */
  with<T>(codec: Codec<T>): CodecRegistry {
    const candidate: unknown = codec
    if (typeof candidate !== 'object' || candidate === null) {
      throw new ConfigurationError(`codec must be an object; got ${String(candidate)}`)
    }
    const { contentType, encode, decode } = candidate as Partial<Codec<T>>
    if (typeof contentType !== 'string' || mediaType(contentType) === '') {
      throw new ConfigurationError(
        `codec.contentType must be a media type such as 'application/json'; got ${JSON.stringify(contentType)}`,
      )
    }
    if (typeof encode !== 'function' || typeof decode !== 'function') {
      throw new ConfigurationError(
        `codec for '${contentType}' must have encode(value) and decode(body) functions`,
      )
    }
    const codecs = new Map(this.#codecs)
    codecs.set(mediaType(contentType), codec as Codec)
    return new CodecRegistry(codecs)
  }

  /**
   * The codec for a content type, or `undefined` when none fits. Parameters (`;charset=utf-8`)
   * and letter case are ignored; no content type means JSON; `application/<anything>+json`
   * falls back to the JSON codec when it has no codec of its own.
   *
   * @example
   * ```ts
   * CodecRegistry.defaults().find('Application/JSON; charset=utf-8') // jsonCodec
   * CodecRegistry.defaults().find('application/vnd.acme.order+json')  // jsonCodec
   * CodecRegistry.defaults().find('application/xml')                  // undefined
   * ```
   */
  find(contentType: string | undefined): Codec | undefined {
    if (contentType === undefined || typeof contentType !== 'string') return this.defaultCodec
    const type = mediaType(contentType)
    if (type === '') return this.defaultCodec
    const codec = this.#codecs.get(type)
    if (codec !== undefined) return codec
    return JSON_SUFFIX.test(type) ? this.defaultCodec : undefined
  }

  /**
   * The codec for messages without a content type, and for publishers that name none: the
   * registry's `application/json` codec.
   *
   * @example
   * ```ts
   * CodecRegistry.defaults().defaultCodec.contentType // 'application/json'
   * ```
   */
  get defaultCodec(): Codec {
    // Every registry starts from defaults() and `with` only replaces, so JSON is always there.
    return this.#codecs.get(JSON_TYPE) ?? jsonCodec
  }

  /**
   * The media types this registry knows, in registration order.
   *
   * @example
   * ```ts
   * CodecRegistry.defaults().contentTypes // ['application/json', 'text/plain', 'application/octet-stream']
   * ```
   */
  get contentTypes(): readonly string[] {
    return [...this.#codecs.keys()]
  }
}
