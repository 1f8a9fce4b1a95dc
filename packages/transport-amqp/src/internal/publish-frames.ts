import type { ChannelModel } from 'amqplib'
import { amqplibSupported } from './wire-headers.js'

/**
 * amqplib encodes each publish into three frames (method, content header, body), each in a
 * buffer of its own, then copies them into one. The content header's table — the headers —
 * costs the most: amqplib walks it through a prototype wrapper, measures and writes every key
 * and string through `Buffer#write`, and allocates a closure per value. Every `@acemq` message
 * carries seven envelope headers, so that table is most of a publish's CPU.
 *
 * On the transport's own publish connection (never on anyone else's) `sendMessage` is
 * replaced by one that writes the same three frames, byte for byte, straight into one buffer:
 * header keys encoded once and kept, ASCII strings copied without a call into C++. It takes
 * only what it can encode exactly as amqplib would — string, boolean, safe-integer and
 * `{ '!': 'int' | 'long' }` header values and well-formed properties, in a publish small
 * enough for amqplib to write as one chunk (under 2 KiB) — and hands anything else (other
 * value types, a timestamp, a property of the wrong type, CC or BCC, a larger message) to
 * amqplib's own `sendMessage`, which encodes it or throws as it always did.
 */

/** amqplib's method and properties ids for `basic.publish` (`lib/defs.js`). */
const BASIC_PUBLISH = 0x3c0028
const BASIC_PROPERTIES = 60
const FRAME_METHOD = 1
const FRAME_HEADER = 2
const FRAME_BODY = 3
const FRAME_END = 206
/** type (1) + channel (2) + size (4) + frame end (1). */
const FRAME_OVERHEAD = 8
/** amqplib writes a publish smaller than this as one chunk (`lib/connection.js`). */
const SINGLE_CHUNK_THRESHOLD = 2048
/**
 * Room for a publish's method and content-header frames. A larger header table goes to amqplib
 * (whose own limit is 64 KiB, past which it throws).
 */
const SCRATCH_SIZE = 16 * 1024
/** At most this many distinct header keys keep their encoding. */
const KEY_CACHE_LIMIT = 1024

const INT32_MIN = -0x80000000
const INT32_MAX = 0x7fffffff
const TWO_32 = 0x100000000

/** The amqplib `Connection` internals the hook relies on (amqplib 2.x). */
interface ConnectionInternals {
  readonly channels: ({ readonly buffer: { write(chunk: Buffer): boolean } } | null)[]
  sentSinceLastCheck: boolean
  sendMessage(...args: unknown[]): boolean
  sendContent(channel: number, body: Buffer): boolean
}

/** What `Args.publish` hands `sendMessage` (method fields and properties in one object). */
interface PublishFields {
  readonly exchange?: unknown
  readonly routingKey?: unknown
  readonly mandatory?: unknown
  readonly immediate?: unknown
  readonly ticket?: unknown
  readonly contentType?: unknown
  readonly contentEncoding?: unknown
  readonly headers?: unknown
  readonly deliveryMode?: unknown
  readonly priority?: unknown
  readonly correlationId?: unknown
  readonly replyTo?: unknown
  readonly expiration?: unknown
  readonly messageId?: unknown
  readonly timestamp?: unknown
  readonly type?: unknown
  readonly userId?: unknown
  readonly appId?: unknown
  readonly clusterId?: unknown
}

const scratch = Buffer.allocUnsafe(SCRATCH_SIZE)
const keys = new Map<string, Buffer>()

/** Not encodable here: the message goes to amqplib's own encoder. */
const NOT_HERE = -1

/**
 * Writes `text` at `offset` as UTF-8 when it fits before `end`: the offset after it, or
 * {@link NOT_HERE}. ASCII is copied code unit by code unit (most keys and values are).
 */
function writeString(text: string, offset: number, end: number): number {
  const length = text.length
  if (offset + length > end) return NOT_HERE
  for (let i = 0; i < length; i++) {
    const code = text.charCodeAt(i)
    if (code > 0x7f) {
      const bytes = Buffer.byteLength(text, 'utf8')
      if (offset + bytes > end) return NOT_HERE
      return offset + scratch.write(text, offset, bytes, 'utf8')
    }
    scratch[offset + i] = code
  }
  return offset + length
}

/** A `shortstr` (length octet, then the bytes) of at most 255 bytes, or {@link NOT_HERE}. */
function writeShortString(text: string, offset: number, end: number): number {
  const after = writeString(text, offset + 1, end)
  if (after === NOT_HERE || after - offset - 1 > 255) return NOT_HERE
  scratch[offset] = after - offset - 1
  return after
}

/** A header key as amqplib writes it: its length octet, then its bytes (kept once encoded). */
function writeKey(key: string, offset: number, end: number): number {
  const encoded = keys.get(key)
  if (encoded === undefined) {
    const after = writeShortString(key, offset, end)
    if (after === NOT_HERE) return NOT_HERE
    if (keys.size < KEY_CACHE_LIMIT) keys.set(key, Buffer.from(scratch.subarray(offset, after)))
    return after
  }
  const length = encoded.length
  if (offset + length > end) return NOT_HERE
  // Keys are short: a loop costs less than Buffer#copy's checks and view.
  for (let i = 0; i < length; i++) scratch[offset + i] = encoded[i]!
  return offset + length
}

function writeInt32(value: number, offset: number): number {
  scratch.writeInt32BE(value, offset)
  return offset + 4
}

/** A signed 64-bit integer from a safe integer, without a BigInt. */
function writeInt64(value: number, offset: number): number {
  const high = Math.floor(value / TWO_32)
  scratch.writeInt32BE(high, offset)
  scratch.writeUInt32BE(value - high * TWO_32, offset + 4)
  return offset + 8
}

/**
 * One header value, tag first, as amqplib's `encodeFieldValue` writes it; {@link NOT_HERE} for
 * a value outside the kinds handled here.
 */
function writeValue(value: unknown, offset: number, end: number): number {
  if (typeof value === 'string') {
    if (offset + 5 > end) return NOT_HERE
    scratch[offset] = 0x53 // 'S', a longstr
    const after = writeString(value, offset + 5, end)
    if (after === NOT_HERE) return NOT_HERE
    scratch.writeUInt32BE(after - offset - 5, offset + 1)
    return after
  }
  if (offset + 9 > end) return NOT_HERE
  if (typeof value === 'boolean') {
    scratch[offset] = 0x74 // 't'
    scratch[offset + 1] = value ? 1 : 0
    return offset + 2
  }
  if (typeof value === 'number') return writeGuessedInteger(value, offset)
  if (typeof value === 'object' && value !== null && Object.hasOwn(value, '!')) {
    const typed = value as { readonly '!': unknown; readonly value?: unknown }
    const kind = typed['!']
    const inner = typed.value
    if (typeof inner !== 'number' || !Number.isSafeInteger(inner)) return NOT_HERE
    if (kind === 'long' || kind === 'int64') {
      scratch[offset] = 0x6c // 'l'
      return writeInt64(inner, offset + 1)
    }
    if ((kind === 'int' || kind === 'int32') && inner >= INT32_MIN && inner <= INT32_MAX) {
      scratch[offset] = 0x49 // 'I'
      return writeInt32(inner, offset + 1)
    }
  }
  return NOT_HERE
}

/** A plain number: amqplib picks the smallest signed integer type that holds it. */
function writeGuessedInteger(value: number, offset: number): number {
  // amqplib encodes a fraction (or a huge value) as a double: not handled here.
  if (!Number.isSafeInteger(value)) return NOT_HERE
  if (value >= -0x80 && value < 0x80) {
    scratch[offset] = 0x62 // 'b'
    scratch.writeInt8(value, offset + 1)
    return offset + 2
  }
  if (value >= -0x8000 && value < 0x8000) {
    scratch[offset] = 0x73 // 's'
    scratch.writeInt16BE(value, offset + 1)
    return offset + 3
  }
  if (value >= INT32_MIN && value <= INT32_MAX) {
    scratch[offset] = 0x49 // 'I'
    return writeInt32(value, offset + 1)
  }
  scratch[offset] = 0x6c // 'l'
  return writeInt64(value, offset + 1)
}

/**
 * The header table amqplib would write for `headers` — the object `Args.publish` makes, whose
 * prototype is the caller's table — or {@link NOT_HERE}.
 */
function writeTable(headers: unknown, offset: number, end: number): number {
  if (typeof headers !== 'object' || headers === null) return NOT_HERE
  // Keys of the wrapper's own (amqplib puts CC and BCC there) go to amqplib.
  if (Object.keys(headers).length > 0) return NOT_HERE
  const table = Object.getPrototypeOf(headers) as Record<string, unknown> | null
  let at = offset + 4
  if (table !== null) {
    // for-in over the caller's table visits what it visits over the empty wrapper, in order.
    for (const key in table) {
      const value = table[key]
      if (value === undefined) continue
      at = writeKey(key, at, end)
      if (at === NOT_HERE) return NOT_HERE
      at = writeValue(value, at, end)
      if (at === NOT_HERE) return NOT_HERE
    }
  }
  scratch.writeUInt32BE(at - offset - 4, offset)
  return at
}

/** The property flags of the content-header frame being written. */
let propertyFlags = 0

/**
 * A short-string property (absent when null or undefined, as amqplib has it): the offset after
 * it, or {@link NOT_HERE}.
 */
function writeProperty(value: unknown, flag: number, offset: number, end: number): number {
  if (offset === NOT_HERE || value === undefined || value === null) return offset
  if (typeof value !== 'string') return NOT_HERE
  const after = writeShortString(value, offset, end)
  if (after !== NOT_HERE) propertyFlags |= flag
  return after
}

/** An octet property (delivery mode, priority). */
function writeOctet(value: unknown, flag: number, offset: number, end: number): number {
  if (offset === NOT_HERE || value === undefined || value === null) return offset
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 255) {
    return NOT_HERE
  }
  if (offset + 1 > end) return NOT_HERE
  scratch[offset] = value
  propertyFlags |= flag
  return offset + 1
}

/**
 * The `basic.publish` method frame and the content-header frame for `fields`, written at the
 * start of the scratch buffer: their length, or {@link NOT_HERE}.
 */
export function writePublishHead(channel: number, fields: PublishFields, bodySize: number): number {
  const end = SCRATCH_SIZE - 1
  const { exchange, routingKey, mandatory, immediate, ticket } = fields
  if (typeof exchange !== 'string' || typeof routingKey !== 'string') return NOT_HERE
  if (ticket !== undefined && ticket !== 0) return NOT_HERE
  // Method frame: type, channel, size (below), class and method, ticket, exchange, routing
  // key, the mandatory and immediate bits, frame end.
  scratch[0] = FRAME_METHOD
  scratch.writeUInt16BE(channel, 1)
  scratch.writeUInt32BE(BASIC_PUBLISH, 7)
  scratch.writeUInt16BE(0, 11)
  let offset = writeShortString(exchange, 13, end)
  if (offset === NOT_HERE) return NOT_HERE
  offset = writeShortString(routingKey, offset, end)
  if (offset === NOT_HERE) return NOT_HERE
  if (typeof mandatory !== 'boolean' || (immediate !== undefined && immediate !== false)) {
    return NOT_HERE
  }
  scratch[offset] = mandatory ? 1 : 0
  scratch[offset + 1] = FRAME_END
  scratch.writeUInt32BE(offset + 1 - 7, 3)
  const header = offset + 2
  // Content-header frame: type, channel, size (below), class, weight, body size, flags (below),
  // the properties present, in the order of their flags, frame end.
  if (header + 21 > end) return NOT_HERE
  scratch[header] = FRAME_HEADER
  scratch.writeUInt16BE(channel, header + 1)
  scratch.writeUInt16BE(BASIC_PROPERTIES, header + 7)
  scratch.writeUInt16BE(0, header + 9)
  const high = Math.floor(bodySize / TWO_32)
  scratch.writeUInt32BE(high, header + 11)
  scratch.writeUInt32BE(bodySize - high * TWO_32, header + 15)
  propertyFlags = 0
  offset = header + 21
  offset = writeProperty(fields.contentType, 0x8000, offset, end)
  offset = writeProperty(fields.contentEncoding, 0x4000, offset, end)
  if (offset !== NOT_HERE && fields.headers !== undefined && fields.headers !== null) {
    offset = writeTable(fields.headers, offset, end)
    propertyFlags |= 0x2000
  }
  offset = writeOctet(fields.deliveryMode, 0x1000, offset, end)
  offset = writeOctet(fields.priority, 0x0800, offset, end)
  offset = writeProperty(fields.correlationId, 0x0400, offset, end)
  offset = writeProperty(fields.replyTo, 0x0200, offset, end)
  offset = writeProperty(fields.expiration, 0x0100, offset, end)
  offset = writeProperty(fields.messageId, 0x0080, offset, end)
  // A timestamp goes to amqplib (it has no other use here).
  if (fields.timestamp !== undefined && fields.timestamp !== null) return NOT_HERE
  offset = writeProperty(fields.type, 0x0020, offset, end)
  offset = writeProperty(fields.userId, 0x0010, offset, end)
  offset = writeProperty(fields.appId, 0x0008, offset, end)
  offset = writeProperty(fields.clusterId, 0x0004, offset, end)
  if (offset === NOT_HERE) return NOT_HERE
  scratch[offset] = FRAME_END
  scratch.writeUInt32BE(offset - header - 7, header + 3)
  scratch.writeUInt16BE(propertyFlags, header + 19)
  return offset + 1
}

/**
 * A publish's frames as amqplib writes them to its channel buffer — one chunk when small, the
 * method and header frames then the body frames otherwise — or undefined when this encoder
 * leaves the message to amqplib.
 */
export function encodePublish(
  channel: number,
  fields: PublishFields,
  content: Buffer,
): Buffer | undefined {
  const headLength = writePublishHead(channel, fields, content.length)
  if (headLength === NOT_HERE) return undefined
  const bodyLength = content.length > 0 ? content.length + FRAME_OVERHEAD : 0
  if (headLength + bodyLength >= SINGLE_CHUNK_THRESHOLD) return undefined
  const all = Buffer.allocUnsafe(headLength + bodyLength)
  scratch.copy(all, 0, 0, headLength)
  if (bodyLength > 0) {
    all[headLength] = FRAME_BODY
    all.writeUInt16BE(channel, headLength + 1)
    all.writeUInt32BE(content.length, headLength + 3)
    content.copy(all, headLength + 7)
    all[headLength + 7 + content.length] = FRAME_END
  }
  return all
}

/**
 * Writes the publishes of `model` (the transport's publish connection) with
 * {@link encodePublish}, handing amqplib the ones it leaves. Answers false, changing nothing,
 * when this amqplib is not one whose internals the transport knows.
 */
export function encodePublishesDirectly(model: ChannelModel): boolean {
  if (!amqplibSupported()) return false
  const connection = model.connection as unknown as Partial<ConnectionInternals>
  if (
    !Array.isArray(connection.channels) ||
    typeof connection.sentSinceLastCheck !== 'boolean' ||
    typeof connection.sendMessage !== 'function' ||
    typeof connection.sendContent !== 'function' ||
    Object.hasOwn(connection, 'sendMessage')
  ) {
    return false
  }
  const original = connection.sendMessage
  // amqplib replaces sendMessage on the instance when the connection closes (every later
  // publish then throws), which removes this one too.
  connection.sendMessage = function sendMessage(
    this: ConnectionInternals,
    channel: unknown,
    method: unknown,
    fields: unknown,
    properties: unknown,
    props: unknown,
    content: unknown,
  ): boolean {
    if (
      method === BASIC_PUBLISH &&
      properties === BASIC_PROPERTIES &&
      fields === props &&
      typeof channel === 'number' &&
      typeof fields === 'object' &&
      fields !== null &&
      Buffer.isBuffer(content)
    ) {
      const target = this.channels[channel]
      const frames = target ? encodePublish(channel, fields, content) : undefined
      if (target && frames !== undefined) {
        this.sentSinceLastCheck = true
        return target.buffer.write(frames)
      }
    }
    return original.call(this, channel, method, fields, properties, props, content)
  }
  return true
}
