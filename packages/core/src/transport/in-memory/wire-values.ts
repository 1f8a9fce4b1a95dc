/**
 * AMQP field values as RabbitMQ sees them: the in-memory broker compares declaration arguments,
 * binding identities and headers-exchange values by these rules, and hands consumers headers
 * decoded the way amqplib decodes them.
 */
import type { Headers } from '../transport.js'

/**
 * A header or argument value as it reaches the broker: its AMQP type and value. Integers carry
 * the width amqplib writes them with (a plain number gets the smallest that fits), strings and
 * byte arrays both hold bytes (RabbitMQ compares their bytes), tables are sorted by key.
 */
export type Wire =
  | { readonly t: 'void' }
  | { readonly t: 'bool'; readonly v: boolean }
  | { readonly t: 'int'; readonly w: string; readonly v: number }
  | { readonly t: 'float'; readonly w: 'float' | 'double'; readonly v: number }
  | { readonly t: 'timestamp'; readonly v: number }
  | { readonly t: 'decimal'; readonly v: string }
  | { readonly t: 'bytes'; readonly w: 'longstr' | 'binary'; readonly v: string }
  | { readonly t: 'array'; readonly v: readonly Wire[] }
  | { readonly t: 'table'; readonly v: readonly (readonly [string, Wire])[] }
  | { readonly t: 'other'; readonly v: string }

const INTEGER_WIDTHS: Readonly<Record<string, string>> = {
  byte: 'byte',
  int8: 'byte',
  unsignedbyte: 'unsignedbyte',
  uint8: 'unsignedbyte',
  short: 'short',
  int16: 'short',
  unsignedshort: 'unsignedshort',
  uint16: 'unsignedshort',
  int: 'signedint',
  int32: 'signedint',
  unsignedint: 'unsignedint',
  uint32: 'unsignedint',
  long: 'long',
  int64: 'long',
}

const utf8 = new TextEncoder()

function hex(bytes: Uint8Array): string {
  let out = ''
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0')
  return out
}

/** amqplib's own rule for a plain number: floating point, or an integer of the smallest width. */
function numberWire(n: number): Wire {
  const floating = n >= 0x8000000000000000 || (Math.abs(n) < 0x4000000000000 && Math.floor(n) !== n)
  if (floating || !Number.isFinite(n)) return { t: 'float', w: 'double', v: n }
  const w =
    n >= -128 && n < 128
      ? 'byte'
      : n >= -0x8000 && n < 0x8000
        ? 'short'
        : n >= -0x80000000 && n < 0x80000000
          ? 'signedint'
          : 'long'
  return { t: 'int', w, v: n }
}

export function toWire(value: unknown): Wire {
  switch (typeof value) {
    case 'undefined':
      return { t: 'void' }
    case 'boolean':
      return { t: 'bool', v: value }
    case 'number':
      return numberWire(value)
    case 'bigint':
      return { t: 'int', w: 'long', v: Number(value) }
    case 'string':
      return { t: 'bytes', w: 'longstr', v: hex(utf8.encode(value)) }
    case 'object': {
      if (value === null) return { t: 'void' }
      if (value instanceof Uint8Array) return { t: 'bytes', w: 'binary', v: hex(value) }
      if (Array.isArray(value)) return { t: 'array', v: value.map(toWire) }
      if (Object.hasOwn(value, '!')) {
        const typed = value as { readonly '!': unknown; readonly value: unknown }
        const type = String(typed['!'])
        const inner = typed.value
        const width = INTEGER_WIDTHS[type]
        if (width !== undefined) return { t: 'int', w: width, v: Number(inner) }
        if (type === 'double' || type === 'float64')
          return { t: 'float', w: 'double', v: Number(inner) }
        if (type === 'float') return { t: 'float', w: 'float', v: Math.fround(Number(inner)) }
        if (type === 'timestamp') return { t: 'timestamp', v: Number(inner) }
        if (type === 'decimal') return { t: 'decimal', v: JSON.stringify(inner) }
        if (type === 'string') return toWire(String(inner))
        if (type === 'boolean') return { t: 'bool', v: Boolean(inner) }
        return { t: 'other', v: JSON.stringify(value) }
      }
      return { t: 'table', v: argumentTable(value as Record<string, unknown>, false) }
    }
    default:
      return { t: 'other', v: String(value) }
  }
}

/** An integer of any notation, or undefined. */
export function wholeNumber(value: unknown): number | undefined {
  const wire = toWire(value)
  return wire.t === 'int' ? wire.v : undefined
}

/**
 * A table of arguments or headers as wire values, sorted by key, undefined values left out.
 * `asDeclared`: the top level of declaration arguments, where the AMQP transport writes every
 * safe integer as a 64-bit long.
 */
export function argumentTable(
  args: Readonly<Record<string, unknown>>,
  asDeclared = true,
): (readonly [string, Wire])[] {
  return Object.keys(args)
    .filter((key) => args[key] !== undefined)
    .sort()
    .map((key) => {
      const value = args[key]
      const wire =
        asDeclared && typeof value === 'number' && Number.isSafeInteger(value)
          ? ({ t: 'int', w: 'long', v: value } as const)
          : toWire(value)
      return [key, wire] as const
    })
}

export function headerTable(headers: Headers): Map<string, Wire> {
  return new Map(argumentTable(headers ?? {}, false))
}

/** A string that is equal for values RabbitMQ holds as the same term (type included). */
export function canonical(wire: Wire): string {
  switch (wire.t) {
    case 'array':
      return `A[${wire.v.map(canonical).join(',')}]`
    case 'table':
      return `F{${wire.v.map(([key, value]) => `${JSON.stringify(key)}:${canonical(value)}`).join(',')}}`
    case 'void':
      return 'V'
    case 'int':
    case 'float':
    case 'bytes':
      return `${wire.w}:${String(wire.v)}`
    default:
      return `${wire.t}:${String(wire.v)}`
  }
}

const numeric = (wire: Wire): wire is Extract<Wire, { v: number }> =>
  wire.t === 'int' || wire.t === 'float' || wire.t === 'timestamp'

/** Erlang's `==` on two field values: numbers compare across types, bytes by their bytes. */
export function looselyEqual(a: Wire, b: Wire): boolean {
  if (numeric(a) && numeric(b)) return a.v === b.v
  if (a.t === 'bytes' && b.t === 'bytes') return a.v === b.v
  if (a.t === 'array' && b.t === 'array') {
    return a.v.length === b.v.length && a.v.every((item, i) => sameTyped(item, b.v[i] as Wire))
  }
  if (a.t === 'table' && b.t === 'table') {
    return (
      a.v.length === b.v.length &&
      a.v.every(([key, item], i) => {
        const other = b.v[i] as readonly [string, Wire]
        return key === other[0] && sameTyped(item, other[1])
      })
    )
  }
  return canonical(a) === canonical(b)
}

/** Inside arrays and tables RabbitMQ keeps `{type, value}`: the types must be the same too. */
function sameTyped(a: Wire, b: Wire): boolean {
  const typeOf = (wire: Wire): string => ('w' in wire ? wire.w : wire.t)
  return typeOf(a) === typeOf(b) && looselyEqual(a, b)
}

/**
 * Whether two arguments are equivalent to RabbitMQ on a re-declaration: integers of any width
 * with the same value, strings and bytes with the same bytes, or the same value otherwise.
 */
export function equivalentArgument(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b
  const [left, right] = [toWire(a), toWire(b)]
  if (left.t === 'int' && right.t === 'int') return left.v === right.v
  if (left.t === 'bytes' && right.t === 'bytes') return left.v === right.v
  return canonical(left) === canonical(right)
}

/**
 * Headers as a consumer reads them through amqplib, which decodes every integer and float to a
 * number (timestamps and decimals keep their notation) and drops undefined values. The same
 * object when nothing changes.
 */
export function asDecoded(headers: Headers): Headers {
  let copy: Record<string, unknown> | undefined
  for (const key of Object.keys(headers)) {
    const value = headers[key]
    const decoded = decodedValue(value)
    if (decoded !== value) {
      copy ??= { ...headers }
      if (decoded === undefined) delete copy[key]
      else copy[key] = decoded
    }
  }
  return copy ?? headers
}

function decodedValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return value
  if (Array.isArray(value)) {
    let changed = false
    const items = value.map((item) => {
      const decoded = decodedValue(item)
      if (decoded !== item) changed = true
      return decoded
    })
    return changed ? items : value
  }
  if (Object.hasOwn(value, '!')) {
    const wire = toWire(value)
    if (wire.t === 'int' || wire.t === 'float') return wire.v
    if (wire.t === 'bytes') return (value as { value: unknown }).value
    if (wire.t === 'bool') return wire.v
    return value
  }
  return asDecoded(value as Headers)
}
