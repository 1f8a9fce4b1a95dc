import { ConfigurationError } from '../errors.js'

/**
 * Headers and properties as JSON text that reads back to the same values with the same types
 * (docs/design.md §27): bytes stay bytes (`{"$b": base64}`), a `bigint` stays a `bigint`
 * (`{"$n": "…"}`), `-0`, `NaN` and the infinities stay numbers (`{"$f": "…"}`), amqplib's typed
 * notation (`{"!": "long", "value": 5}`) and arrays keep their shape, and a table whose own keys
 * start with `$` is wrapped (`{"$o": {…}}`) so it is never read as one of these forms.
 *
 * @example
 * ```ts
 * decodeWireJson(encodeWireJson({ k: Buffer.from('a') })) // { k: Uint8Array [97] }
 * ```
 */
export function encodeWireJson(value: unknown): string {
  return JSON.stringify(encode(value, 0))
}

/** The values {@link encodeWireJson} wrote. Throws a `ConfigurationError` on other text. */
export function decodeWireJson(text: string): unknown {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new ConfigurationError(`not wire JSON: ${String(error)}`, { cause: error })
  }
  return decode(parsed)
}

/** Tables nest; a loop in one is refused rather than followed forever. */
const MAX_DEPTH = 64

function encode(value: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH) throw new ConfigurationError(`a header nests over ${MAX_DEPTH} deep`)
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value
  if (value === undefined) return { $u: 1 }
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return { $f: '-0' }
    return Number.isFinite(value) ? value : { $f: String(value) }
  }
  if (typeof value === 'bigint') return { $n: value.toString() }
  if (value instanceof Uint8Array) return { $b: Buffer.from(value).toString('base64') }
  if (value instanceof Date) return { $d: value.getTime() }
  if (Array.isArray(value)) return value.map((item) => encode(item, depth + 1))
  if (typeof value === 'object') {
    const out: Record<string, unknown> = {}
    let dollar = false
    for (const [key, item] of Object.entries(value)) {
      if (key.startsWith('$')) dollar = true
      out[key] = encode(item, depth + 1)
    }
    return dollar ? { $o: out } : out
  }
  throw new ConfigurationError(`a header value of type ${typeof value} cannot be archived`)
}

function decode(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(decode)
  const record = value as Record<string, unknown>
  const keys = Object.keys(record)
  if (keys.length === 1) {
    const tag = keys[0] as string
    const inner = record[tag]
    switch (tag) {
      case '$u':
        return undefined
      case '$f':
        return inner === '-0' ? -0 : Number(inner)
      case '$n':
        return BigInt(String(inner))
      case '$b':
        // A Buffer (a Uint8Array): a transport writes a bare Uint8Array header as a table of
        // numbers, and the bytes would come back as something else.
        return Buffer.from(String(inner), 'base64')
      case '$d':
        return new Date(Number(inner))
      case '$o':
        return decodeTable(inner as Record<string, unknown>)
    }
  }
  return decodeTable(record)
}

function decodeTable(record: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(record)) out[key] = decode(item)
  return out
}
