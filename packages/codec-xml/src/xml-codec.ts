import { ConfigurationError, type Codec } from '@acemq/core'
import { decodeFailure, describeError, payloadKind, utf8Body } from '@acemq/core/spi'
import { XMLBuilder, XMLParser, XMLValidator } from 'fast-xml-parser'

/** Options of {@link xmlCodec}. */
export interface XmlCodecOptions {
  /**
   * The element a payload is written in, as the Java and Go libraries name it after the type:
   * `OrderPlaced`. Decoding reads any root element.
   */
  readonly rootName: string
  /**
   * Element names that always decode to an array, even when the body holds one of them. XML has
   * no arrays: without this, `<items>a</items>` reads as `'a'` and two of them as `['a', 'b']`.
   */
  readonly arrays?: readonly string[]
}

// An XML Name (XML 1.0 §2.3), ASCII letters and the usual punctuation: what a type name is.
const XML_NAME = /^[A-Za-z_][A-Za-z0-9_.:-]*$/
// Comments and CDATA may hold any text; they are taken out before looking for a DTD or an entity.
const COMMENTS_AND_CDATA = /<!--[\s\S]*?-->|<!\[CDATA\[[\s\S]*?\]\]>/g
const DTD = /<!(DOCTYPE|ENTITY)\b/i
// The five predefined entities and character references are all XML has without a DTD.
const OTHER_ENTITY = /&(?!(?:amp|lt|gt|quot|apos);)([A-Za-z_:][\w.:-]{0,31});/

const ATTRIBUTE_PREFIX = '@'
const TEXT = '#text'

// No DTD is ever read (refused above): the entities left are the five predefined ones and
// character references, and `htmlEntities` is what makes the parser decode the latter.
function parser(arrays: ReadonlySet<string>): XMLParser {
  return new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: ATTRIBUTE_PREFIX,
    textNodeName: TEXT,
    parseTagValue: false,
    parseAttributeValue: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    processEntities: true,
    htmlEntities: true,
    isArray: (name) => arrays.has(name),
  })
}

// A key that is no XML name would be written as markup no reader parses (`<order id>`), and the
// consumer would park every message: refuse it before anything is sent.
function assertElementNames(value: unknown, path: string): void {
  if (Array.isArray(value)) {
    value.forEach((item, index) => assertElementNames(item, `${path}[${index}]`))
    return
  }
  if (typeof value !== 'object' || value === null || value instanceof Date) return
  for (const [key, item] of Object.entries(value)) {
    const name = key.startsWith(ATTRIBUTE_PREFIX) ? key.slice(ATTRIBUTE_PREFIX.length) : key
    if (key !== TEXT && !XML_NAME.test(name)) {
      throw new ConfigurationError(
        `payload${path} has the key ${JSON.stringify(key)}, which is not an XML name, so it cannot be an element or attribute`,
      )
    }
    assertElementNames(item, `${path}.${key}`)
  }
}

function refuseDtdAndEntities(text: string): void {
  const bare = text.replace(COMMENTS_AND_CDATA, '')
  const dtd = DTD.exec(bare)
  if (dtd !== null) {
    throw decodeFailure(
      `the body declares a DTD (<!${dtd[1]} …>), and XML with a DTD is refused: its entities can read files or expand without bound`,
    )
  }
  const entity = OTHER_ENTITY.exec(bare)
  if (entity !== null) {
    throw decodeFailure(
      `the body refers to the entity '&${entity[1] ?? ''};', and only &amp; &lt; &gt; &quot; &apos; and character references are read (no DTD defines others)`,
    )
  }
}

/**
 * `application/xml` (UTF-8), as the Java and Go AceMQ libraries write it: one root element named
 * after the type, a child element per field, a repeated element per list item. XML carries no
 * types, so every value decodes as text (`<totalCents>4250</totalCents>` is `'4250'`);
 * attributes decode as `@name` keys and text beside elements as `#text`. A body with a DTD
 * (`<!DOCTYPE`) or an entity other than the five predefined ones is refused, so no body can
 * read a file or expand into gigabytes.
 *
 * Decoding a body that is not UTF-8, not well-formed, has more than one root, or has a DTD or an
 * entity throws an `AceMqError` with code `ACEMQ_DECODE`; the consumer parks the message with
 * the reason. Encoding anything but an object, or one with a key that is no XML name, throws a
 * `ConfigurationError`.
 *
 * @example
 * ```ts
 * const orders = xmlCodec({ rootName: 'OrderPlaced', arrays: ['items'] })
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(orders) })
 * ```
 */
export function xmlCodec(options: XmlCodecOptions): Codec<Record<string, unknown>> {
  const given: unknown = options
  if (typeof given !== 'object' || given === null) {
    throw new ConfigurationError(`xmlCodec(options) must be an object; got ${String(given)}`)
  }
  const { rootName, arrays = [] } = options
  if (typeof rootName !== 'string' || !XML_NAME.test(rootName)) {
    throw new ConfigurationError(
      `xmlCodec(options.rootName) must be an XML element name such as 'OrderPlaced'; got ${JSON.stringify(rootName)}`,
    )
  }
  if (!Array.isArray(arrays) || !arrays.every((name) => typeof name === 'string')) {
    throw new ConfigurationError(
      `xmlCodec(options.arrays) must be an array of element names; got ${JSON.stringify(arrays)}`,
    )
  }
  const reader = parser(new Set(arrays))
  const writer = new XMLBuilder({
    ignoreAttributes: false,
    attributeNamePrefix: ATTRIBUTE_PREFIX,
    textNodeName: TEXT,
  })

  return Object.freeze({
    contentType: 'application/xml',
    encode(value: Record<string, unknown>): Uint8Array {
      const payload: unknown = value
      if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
        throw new ConfigurationError(
          `payload must be an object for application/xml (its fields become the elements of <${rootName}>); got ${payloadKind(payload)}`,
        )
      }
      assertElementNames(payload, '')
      let text: string
      try {
        text = writer.build({ [rootName]: payload }) as string
      } catch (error) {
        throw new ConfigurationError(`payload cannot be encoded as XML: ${describeError(error)}`, {
          cause: error,
        })
      }
      return Buffer.from(text, 'utf8')
    },
    decode(body: Uint8Array): Record<string, unknown> {
      const text = utf8Body(body, 'XML')
      refuseDtdAndEntities(text)
      const valid = XMLValidator.validate(text)
      if (valid !== true) {
        const { msg, line, col } = valid.err
        throw decodeFailure(`the body is not well-formed XML: ${msg} (line ${line}, column ${col})`)
      }
      let document: Record<string, unknown>
      try {
        document = reader.parse(text) as Record<string, unknown>
      } catch (error) {
        throw decodeFailure(`the body is not XML: ${describeError(error)}`, error)
      }
      const roots = Object.keys(document)
      const [root] = roots
      if (root === undefined || roots.length > 1) {
        throw decodeFailure(
          `the body is not one XML document: it has ${roots.length} root elements (${roots.join(', ')})`,
        )
      }
      const content = document[root]
      // A root with only text (or nothing) is still an object, so the payload's type holds.
      if (typeof content === 'string') return content === '' ? {} : { [TEXT]: content }
      return content as Record<string, unknown>
    },
  })
}
