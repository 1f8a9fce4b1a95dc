import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import type { ChannelModel } from 'amqplib'
import type { Headers } from '@acemq/core'

/**
 * amqplib decodes every integer field to a JS number (and a float to a double) and, writing a
 * number back, picks the smallest width that holds it: a Java `Long` 5 read and republished
 * comes back as a byte. To copy a message's headers faithfully the transport needs the header
 * table as it travelled. amqplib does not hand it out, so on the transport's own consume
 * connection (never on anyone else's) the frame reader is wrapped: before amqplib decodes a
 * content-header frame, the raw bytes of its header table are copied aside, keyed by the
 * properties object amqplib builds from that frame (which becomes `message.properties`). A
 * copy's typed headers are decoded from those bytes lazily, only when asked for, and checked
 * against amqplib's own reading of the same table; on any disagreement the transport falls back
 * to the plain headers rather than guess.
 */

/** The amqplib `Connection` internals the hook relies on (amqplib 2.x, `lib/connection.js`). */
interface ConnectionInternals {
  rest: Buffer
  recvSinceLastCheck: boolean
  readonly maxFrameSize?: number
  readonly stream: { read(): Buffer | null }
  recvFrame(): unknown
}

const FRAME_HEADER = 2
/** type (1) + channel (2) + size (4). */
const FRAME_PREFIX = 7
/** class id (2) + weight (2) + body size (8), then the property flags. */
const FLAGS_OFFSET = FRAME_PREFIX + 12
const BASIC_CLASS = 60
const HAS_CONTENT_TYPE = 0x8000
const HAS_CONTENT_ENCODING = 0x4000
const HAS_HEADERS = 0x2000

/**
 * Where a kept table lives: on the properties object amqplib built from its frame, under a
 * symbol (never seen by users: deliveries copy the named properties into an object of their
 * own). A `WeakMap` entry per message, as before, cost the garbage collector an ephemeron each.
 */
const RAW_TABLE = Symbol('acemq.rawHeaderTable')

interface WithTable {
  [RAW_TABLE]?: Buffer
}

let supported: boolean | undefined

/** The amqplib in use is one whose internals the transport's hooks know (2.x). */
export function amqplibSupported(): boolean {
  if (supported !== undefined) return supported
  try {
    const main = createRequire(import.meta.url).resolve('amqplib')
    const manifest = JSON.parse(
      fs.readFileSync(path.join(path.dirname(main), 'package.json'), 'utf8'),
    ) as { name?: unknown; version?: unknown }
    supported =
      manifest.name === 'amqplib' &&
      typeof manifest.version === 'string' &&
      manifest.version.startsWith('2.')
  } catch {
    supported = false
  }
  return supported
}

function internalsOf(model: ChannelModel): ConnectionInternals | undefined {
  const connection = model.connection as unknown as Partial<ConnectionInternals> | undefined
  if (
    connection === undefined ||
    !Buffer.isBuffer(connection.rest) ||
    typeof connection.recvFrame !== 'function' ||
    Object.hasOwn(connection, 'recvFrame') ||
    typeof connection.recvSinceLastCheck !== 'boolean' ||
    typeof connection.stream?.read !== 'function'
  ) {
    return undefined
  }
  return connection as ConnectionInternals
}

/**
 * Starts keeping the raw header tables of what arrives on `model` (the transport's consume
 * connection). Answers false, changing nothing, when this amqplib is not one the hook knows.
 */
export function keepHeaderTables(model: ChannelModel): boolean {
  if (!amqplibSupported()) return false
  const connection = internalsOf(model)
  if (connection === undefined) return false
  const original = connection.recvFrame
  connection.recvFrame = function recvFrame(this: ConnectionInternals): unknown {
    // Buffer the whole next frame first, reading as amqplib's own recvFrame does, so the bytes
    // it is decoded from are known; amqplib then decodes it without reading.
    let rest = this.rest
    for (;;) {
      if (rest.length >= FRAME_PREFIX) {
        const size = rest.readUInt32BE(3)
        const max = this.maxFrameSize ?? 0
        // A frame too big is amqplib's to refuse.
        if (rest.length >= FRAME_PREFIX + size + 1 || (max > 0 && size > max)) break
      }
      const incoming = this.stream.read()
      if (incoming === null) return false
      this.recvSinceLastCheck = true
      rest = Buffer.concat([rest, incoming])
      this.rest = rest
    }
    const frame = original.call(this)
    if (rest[0] === FRAME_HEADER) keepTable(rest, frame)
    return frame
  }
  return true
}

function keepTable(bytes: Buffer, frame: unknown): void {
  if (typeof frame !== 'object' || frame === null) return
  const properties = (frame as { fields?: { headers?: unknown } }).fields
  if (properties?.headers === undefined || bytes.readUInt16BE(FRAME_PREFIX) !== BASIC_CLASS) return
  const flags = bytes.readUInt16BE(FLAGS_OFFSET)
  if ((flags & HAS_HEADERS) === 0) return
  let offset = FLAGS_OFFSET + 2
  if ((flags & HAS_CONTENT_TYPE) !== 0) offset += 1 + (bytes[offset] ?? 0)
  if ((flags & HAS_CONTENT_ENCODING) !== 0) offset += 1 + (bytes[offset] ?? 0)
  const length = bytes.readUInt32BE(offset)
  // A copy: a view would keep the whole socket read buffer alive while the message is held.
  ;(properties as WithTable)[RAW_TABLE] = Buffer.from(
    bytes.subarray(offset + 4, offset + 4 + length),
  )
}

/**
 * The headers of a delivered message with every value's wire type kept, in amqplib's typed
 * notation (`{ '!': 'long', value: 5 }`), so that publishing them writes the same types; or
 * `undefined` when the raw table was not kept or does not read as amqplib read it.
 */
export function typedHeaders(properties: object, decoded: unknown): Headers | undefined {
  const raw = (properties as WithTable)[RAW_TABLE]
  if (raw === undefined) return undefined
  let typed: Headers
  try {
    typed = decodeTable(raw)
  } catch {
    return undefined
  }
  return sameReading(typed, decoded) ? typed : undefined
}

/** A signed or unsigned 64-bit integer: a number when exact, a bigint beyond 2^53. */
function int64(value: bigint): number | bigint {
  const n = Number(value)
  return Number.isSafeInteger(n) ? n : value
}

/** Decodes an AMQP field table (RabbitMQ's tags), keeping every value's type. */
export function decodeTable(bytes: Buffer): Headers {
  const table: Headers = {}
  let offset = 0
  while (offset < bytes.length) {
    const keyLength = bytes.readUInt8(offset)
    const key = bytes.toString('utf8', offset + 1, offset + 1 + keyLength)
    offset += 1 + keyLength
    const [value, next] = decodeValue(bytes, offset)
    table[key] = value
    offset = next
  }
  return table
}

function decodeValue(bytes: Buffer, at: number): [unknown, number] {
  const tag = String.fromCharCode(bytes.readUInt8(at))
  const offset = at + 1
  switch (tag) {
    case 'b':
      return [{ '!': 'byte', value: bytes.readInt8(offset) }, offset + 1]
    case 'B':
      return [{ '!': 'unsignedbyte', value: bytes.readUInt8(offset) }, offset + 1]
    case 's':
      return [{ '!': 'short', value: bytes.readInt16BE(offset) }, offset + 2]
    case 'u':
      return [{ '!': 'unsignedshort', value: bytes.readUInt16BE(offset) }, offset + 2]
    case 'I':
      return [{ '!': 'int', value: bytes.readInt32BE(offset) }, offset + 4]
    case 'i':
      return [{ '!': 'unsignedint', value: bytes.readUInt32BE(offset) }, offset + 4]
    case 'l':
      return [{ '!': 'long', value: int64(bytes.readBigInt64BE(offset)) }, offset + 8]
    case 'T':
      return [{ '!': 'timestamp', value: int64(bytes.readBigUInt64BE(offset)) }, offset + 8]
    case 'f':
      return [{ '!': 'float', value: bytes.readFloatBE(offset) }, offset + 4]
    case 'd':
      return [{ '!': 'double', value: bytes.readDoubleBE(offset) }, offset + 8]
    case 'D': {
      const places = bytes.readUInt8(offset)
      const digits = bytes.readUInt32BE(offset + 1)
      return [{ '!': 'decimal', value: { places, digits } }, offset + 5]
    }
    case 't':
      return [bytes.readUInt8(offset) !== 0, offset + 1]
    case 'V':
      return [null, offset]
    case 'S': {
      const length = bytes.readUInt32BE(offset)
      return [bytes.toString('utf8', offset + 4, offset + 4 + length), offset + 4 + length]
    }
    case 'x': {
      const length = bytes.readUInt32BE(offset)
      return [Buffer.from(bytes.subarray(offset + 4, offset + 4 + length)), offset + 4 + length]
    }
    case 'F': {
      const length = bytes.readUInt32BE(offset)
      const end = offset + 4 + length
      return [decodeTable(bytes.subarray(offset + 4, end)), end]
    }
    case 'A': {
      const length = bytes.readUInt32BE(offset)
      const end = offset + 4 + length
      const items: unknown[] = []
      let cursor = offset + 4
      while (cursor < end) {
        const [item, next] = decodeValue(bytes, cursor)
        items.push(item)
        cursor = next
      }
      return [items, end]
    }
    default:
      throw new TypeError(`unknown field type tag '${tag}'`)
  }
}

const PLAIN_NUMBER_TYPES: ReadonlySet<unknown> = new Set([
  'byte',
  'unsignedbyte',
  'short',
  'unsignedshort',
  'int',
  'unsignedint',
  'long',
  'float',
  'double',
])

/** Whether `typed` is what amqplib read (`decoded`) with the types put back. */
function sameReading(typed: unknown, decoded: unknown): boolean {
  if (Buffer.isBuffer(typed)) return Buffer.isBuffer(decoded) && typed.equals(decoded)
  if (Array.isArray(typed)) {
    return (
      Array.isArray(decoded) &&
      typed.length === decoded.length &&
      typed.every((item, index) => sameReading(item, decoded[index]))
    )
  }
  if (typeof typed !== 'object' || typed === null) return Object.is(typed, decoded)
  if (typeof decoded !== 'object' || decoded === null) {
    const { '!': type, value } = typed as { '!'?: unknown; value?: unknown }
    return PLAIN_NUMBER_TYPES.has(type) && Object.is(Number(value), decoded)
  }
  if (Object.hasOwn(typed, '!')) {
    // amqplib keeps timestamps and decimals typed itself.
    const { '!': type, value } = typed as { '!': unknown; value: unknown }
    const other = decoded as { '!'?: unknown; value?: unknown }
    if (type !== other['!']) return false
    if (type === 'timestamp') return Object.is(Number(value), other.value)
    return JSON.stringify(value) === JSON.stringify(other.value)
  }
  const keys = Object.keys(typed)
  const otherKeys = Object.keys(decoded)
  return (
    keys.length === otherKeys.length &&
    keys.every(
      (key, index) =>
        otherKeys[index] === key && sameReading((typed as Headers)[key], (decoded as Headers)[key]),
    )
  )
}
