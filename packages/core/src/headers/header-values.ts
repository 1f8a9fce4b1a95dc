/**
 * Header and argument values as they travel, and lenient readers for them as any AMQP client
 * writes them. Both the envelope and the transports use them, so they sit below both
 * (docs/design.md §1). Every AceMQ library writes
 * its integers with its own idea of width and its strings as either text or bytes, so a reader
 * that insists on one shape would make messages from a sibling library look header-less.
 */

/**
 * Header and argument values as they travel. Integers whose width matters are written as
 * {@link TypedInteger}s; everything else is a string, number, boolean, bytes, array or table.
 */
export type HeaderValue = unknown

/** AMQP-style headers: a string-keyed table. */
export type Headers = Record<string, HeaderValue>

/**
 * An integer with an explicit AMQP field width: `int` is signed 32-bit, `long` signed 64-bit.
 * This is amqplib's own notation, so an AMQP transport passes it through unchanged.
 */
export interface TypedInteger {
  readonly '!': 'int' | 'long'
  readonly value: number
}

// `fatal` so that bytes which are not UTF-8 read as "absent" rather than as a string full of
// replacement characters that silently differs from what the sender meant.
const utf8 = new TextDecoder('utf-8', { fatal: true })

const DECIMAL_INTEGER = /^[+-]?\d+$/

function isTyped(value: object): value is { readonly '!': unknown; readonly value: unknown } {
  return Object.hasOwn(value, '!') && Object.hasOwn(value, 'value')
}

function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

function integerFromString(text: string): number | undefined {
  const trimmed = text.trim()
  if (!DECIMAL_INTEGER.test(trimmed)) return undefined
  const parsed = Number(trimmed)
  return Number.isSafeInteger(parsed) ? parsed : undefined
}

/**
 * Reads an integer header value of any width and shape: a JS number, a `bigint`, amqplib's
 * typed notation (`{ '!': 'long', value }`, including a zero-place `decimal`), a decimal
 * string, or the same string as UTF-8 bytes. Anything else — a fraction, a number beyond
 * `Number.MAX_SAFE_INTEGER`, a boolean, an array, a table, text that is not an integer —
 * reads as `undefined`, and the caller falls back to its default. It never throws. Range
 * checks (at least 1, plausible epoch) are the caller's: this only answers "which integer".
 *
 * @example
 * ```ts
 * headerInteger({ '!': 'int', value: 3 }) // 3
 * headerInteger(Buffer.from('42'))       // 42
 * headerInteger(1.5)                     // undefined
 * ```
 */
export function headerInteger(value: unknown): number | undefined {
  return readInteger(value, 0)
}

function readInteger(value: unknown, depth: number): number | undefined {
  switch (typeof value) {
    case 'number':
      return Number.isSafeInteger(value) ? value : undefined
    case 'bigint':
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(value)
        : undefined
    case 'string':
      return integerFromString(value)
    case 'object': {
      if (value === null) return undefined
      if (value instanceof Uint8Array) {
        const text = decodeUtf8(value)
        return text === undefined ? undefined : integerFromString(text)
      }
      // A typed value nests at most once; the depth bound keeps a hostile table from recursing.
      if (depth > 0 || Array.isArray(value) || !isTyped(value)) return undefined
      if (value['!'] === 'decimal') return decimalInteger(value.value)
      return readInteger(value.value, depth + 1)
    }
    default:
      return undefined
  }
}

// amqplib decodes an AMQP decimal as `{ places, digits }`; it is an integer only when the
// scaled value has no fraction.
function decimalInteger(value: unknown): number | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const { places, digits } = value as { readonly places?: unknown; readonly digits?: unknown }
  if (typeof places !== 'number' || typeof digits !== 'number') return undefined
  if (!Number.isSafeInteger(places) || !Number.isSafeInteger(digits) || places < 0) return undefined
  const scale = 10 ** places
  return digits % scale === 0 ? digits / scale : undefined
}

/**
 * Reads a string header value: a string, UTF-8 bytes (amqplib hands a byte-array header over
 * as a `Buffer`), amqplib's typed notation around either, or a whole number (rendered in
 * decimal, so the key `42` and the key `'42'` are the same key). Empty strings, bytes that are
 * not UTF-8, fractions, booleans, arrays and tables read as `undefined`. It never throws.
 *
 * @example
 * ```ts
 * headerString(Buffer.from('orders@host-7')) // 'orders@host-7'
 * headerString('')                            // undefined
 * ```
 */
export function headerString(value: unknown): string | undefined {
  return readString(value, 0)
}

function readString(value: unknown, depth: number): string | undefined {
  switch (typeof value) {
    case 'string':
      return value === '' ? undefined : value
    case 'number':
      return Number.isSafeInteger(value) ? String(value) : undefined
    case 'bigint':
      return String(value)
    case 'object': {
      if (value === null) return undefined
      if (value instanceof Uint8Array) {
        const text = decodeUtf8(value)
        return text === '' ? undefined : text
      }
      if (depth > 0 || Array.isArray(value) || !isTyped(value)) return undefined
      return readString(value.value, depth + 1)
    }
    default:
      return undefined
  }
}
