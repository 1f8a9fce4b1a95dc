import { ConfigurationError, type Codec } from '@acemq/core'
import { decodeFailure, describeError, payloadKind } from '@acemq/core/spi'
import protobuf, { type Root, type Type } from 'protobufjs'

/** Options of {@link protobufCodec}. */
export interface ProtobufCodecOptions {
  /**
   * The `.proto` source (`syntax = "proto3"; package acemq.test; message OrderPlaced { … }`), or
   * a protobufjs `Root` already loaded. Source is read with its field names as written
   * (`order_id`), as the Java and Go libraries' values name them.
   */
  readonly schema: string | Root
  /** The message every body holds, fully qualified: `acemq.test.OrderPlaced`. */
  readonly messageType: string
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array)
  )
}

// Checks a payload against the message's fields before protobufjs sees it: protobufjs leaves out
// a key that is no field without a word, and takes no bigint. A bigint becomes a Long.
function prepare(
  type: Type,
  value: Record<string, unknown>,
  path: string,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    const field = type.fields[key]
    if (field === undefined) {
      throw new ConfigurationError(
        `payload${path}.${key} is not a field of ${type.fullName.replace(/^\./, '')} (its fields: ${Object.keys(type.fields).join(', ')})`,
      )
    }
    out[key] = prepareField(field, item, `${path}.${key}`)
  }
  return out
}

function prepareField(field: protobuf.Field, item: unknown, path: string): unknown {
  const message = field.resolvedType instanceof protobuf.Type ? field.resolvedType : undefined
  const one = (value: unknown, at: string): unknown => {
    if (typeof value === 'bigint')
      return long(value, field.type.startsWith('u') || field.type.startsWith('fixed'))
    if (message !== undefined && isRecord(value)) return prepare(message, value, at)
    return value
  }
  if (field.repeated && Array.isArray(item))
    return item.map((value, index) => one(value, `${path}[${index}]`))
  if (field.map && isRecord(item)) {
    return Object.fromEntries(
      Object.entries(item).map(([key, value]) => [key, one(value, `${path}.${key}`)]),
    )
  }
  return one(item, path)
}

// protobufjs types util.Long as a bare constructor; it is the `long` package, which it depends on.
const Long = protobuf.util.Long as unknown as {
  fromString(text: string, unsigned: boolean): protobuf.Long
}

function long(value: bigint, unsigned: boolean): protobuf.Long {
  return Long.fromString(value.toString(), unsigned)
}

// 64-bit integers decode as bigint, then become numbers when that loses nothing: 4250 is a
// number, 123456789012345678 keeps its digits.
function safeIntegers(value: unknown): unknown {
  if (typeof value === 'bigint') {
    const number = Number(value)
    return Number.isSafeInteger(number) ? number : value
  }
  if (Array.isArray(value)) return value.map(safeIntegers)
  if (isRecord(value)) {
    for (const [key, item] of Object.entries(value)) value[key] = safeIntegers(item)
  }
  return value
}

function messageTypeOf(options: ProtobufCodecOptions): Type {
  const { schema, messageType } = options
  let root: Root
  if (typeof schema === 'string') {
    try {
      root = protobuf.parse(schema, { keepCase: true }).root
    } catch (error) {
      throw new ConfigurationError(
        `protobufCodec(options.schema) is not a valid .proto source: ${describeError(error)}`,
        { cause: error },
      )
    }
  } else if (schema instanceof protobuf.Root) {
    root = schema
  } else {
    throw new ConfigurationError(
      `protobufCodec(options.schema) must be .proto source text or a protobufjs Root; got ${payloadKind(schema)}`,
    )
  }
  try {
    // Resolved now, so a field of an unknown type fails here, and nested messages are walked.
    root.resolveAll()
  } catch (error) {
    throw new ConfigurationError(
      `protobufCodec(options.schema) does not resolve: ${describeError(error)}`,
      { cause: error },
    )
  }
  if (typeof messageType !== 'string' || messageType === '') {
    throw new ConfigurationError(
      `protobufCodec(options.messageType) must name a message, e.g. 'acemq.test.OrderPlaced'; got ${JSON.stringify(messageType)}`,
    )
  }
  try {
    return root.lookupType(messageType)
  } catch (error) {
    throw new ConfigurationError(
      `protobufCodec(options.messageType) is '${messageType}', which the schema does not define as a message: ${describeError(error)}`,
      { cause: error },
    )
  }
}

/**
 * `application/x-protobuf`: one message of `messageType` in the Protobuf binary encoding, as the
 * Java and Go AceMQ libraries write it. Decoded values name fields as the `.proto` does
 * (`order_id`), carry every field (proto3 defaults included), and hold 64-bit integers as numbers
 * when they fit (`bigint` otherwise). Decoding a body that is not such a message (a wrong wire
 * type, a length past the end) throws an `AceMqError` with code `ACEMQ_DECODE`; the consumer
 * parks the message with the reason. Encoding an object with a key that is no field, or a value
 * of the wrong type, throws a `ConfigurationError` naming the field.
 *
 * @example
 * ```ts
 * const orders = protobufCodec({ schema: orderProto, messageType: 'acemq.test.OrderPlaced' })
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(orders) })
 * ```
 */
export function protobufCodec(options: ProtobufCodecOptions): Codec<Record<string, unknown>> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(`protobufCodec(options) must be an object; got ${String(options)}`)
  }
  const type = messageTypeOf(options)
  const name = type.fullName.replace(/^\./, '')

  return Object.freeze({
    contentType: 'application/x-protobuf',
    encode(value: Record<string, unknown>): Uint8Array {
      if (!isRecord(value)) {
        throw new ConfigurationError(
          `payload must be an object for application/x-protobuf (a ${name}); got ${payloadKind(value)}`,
        )
      }
      const prepared = prepare(type, value, '')
      const invalid = type.verify(prepared)
      if (invalid !== null) {
        throw new ConfigurationError(`payload does not fit ${name}: ${invalid}`)
      }
      return type.encode(type.fromObject(prepared)).finish()
    },
    decode(body: Uint8Array): Record<string, unknown> {
      let message: protobuf.Message
      try {
        message = type.decode(body)
      } catch (error) {
        throw decodeFailure(
          `the body is not a protobuf ${name} (${body.length} byte(s)): ${describeError(error)}`,
          error,
        )
      }
      const object = type.toObject(message, { longs: BigInt, defaults: true })
      return safeIntegers(object) as Record<string, unknown>
    },
  })
}
