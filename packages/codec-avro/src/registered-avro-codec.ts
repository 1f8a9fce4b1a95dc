import { ConfigurationError, type Codec } from '@acemq/core'
import { bodyPreview, decodeFailure } from '@acemq/core/spi'
import type { Type } from 'avsc'
import { avroType, decodeAvro, encodeAvro, type AvroSchema } from './internal/avro-type.js'

/** Options of {@link registeredAvroCodec}. */
export interface RegisteredAvroCodecOptions {
  /** Every schema a body may name, by its registry id (`{ 7: orderPlacedV1, 9: orderPlacedV2 }`). */
  readonly schemas: Readonly<Record<number, AvroSchema>> | ReadonlyMap<number, AvroSchema>
  /** The id this codec writes in front of every body it encodes; one of `schemas`. */
  readonly writeSchemaId: number
}

/** The registered framing's header: one zero byte, then the schema id (4 bytes, big-endian). */
export const AVRO_REGISTERED_HEADER_LENGTH = 5

function schemaId(value: unknown, argument: string): number {
  const id = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0xffff_ffff) {
    throw new ConfigurationError(
      `${argument} must be a schema id, an integer from 0 to 4294967295; got ${JSON.stringify(value)}`,
    )
  }
  return id
}

/**
 * `application/vnd.acemq.avro`: the family's registered Avro framing — one zero byte, the schema
 * id as 4 bytes big-endian, then the Avro binary body written with that schema. The reader looks
 * the id up in `schemas`, so producers can move to a new schema id while consumers still read
 * the old one. Decoding a body without the zero byte, shorter than the header, naming an id not
 * in `schemas`, or whose body is not of that schema throws an `AceMqError` with code
 * `ACEMQ_DECODE`; the consumer parks the message with the reason.
 *
 * @example
 * ```ts
 * const orders = registeredAvroCodec({ schemas: { 7: orderPlaced }, writeSchemaId: 7 })
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(orders) })
 * ```
 */
export function registeredAvroCodec<T = unknown>(options: RegisteredAvroCodecOptions): Codec<T> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(
      `registeredAvroCodec(options) must be an object; got ${String(options)}`,
    )
  }
  const { schemas, writeSchemaId } = options
  if (typeof schemas !== 'object' || schemas === null) {
    throw new ConfigurationError(
      `registeredAvroCodec(options.schemas) must map schema ids to schemas, e.g. { 7: schema }; got ${String(schemas)}`,
    )
  }
  const types = new Map<number, Type>()
  const entries = schemas instanceof Map ? [...schemas.entries()] : Object.entries(schemas)
  for (const [key, schema] of entries) {
    const id = schemaId(key, 'registeredAvroCodec(options.schemas) key')
    types.set(id, avroType(schema, `registeredAvroCodec(options.schemas[${id}])`))
  }
  const writeId = schemaId(writeSchemaId, 'registeredAvroCodec(options.writeSchemaId)')
  const writer = types.get(writeId)
  if (writer === undefined) {
    throw new ConfigurationError(
      `registeredAvroCodec(options.writeSchemaId) is ${writeId}, which options.schemas does not hold (it holds ${[...types.keys()].join(', ') || 'none'})`,
    )
  }
  const header = Buffer.alloc(AVRO_REGISTERED_HEADER_LENGTH)
  header.writeUInt32BE(writeId, 1)

  return Object.freeze({
    contentType: 'application/vnd.acemq.avro',
    encode: (value: T): Uint8Array => Buffer.concat([header, encodeAvro(writer, value)]),
    decode(body: Uint8Array): T {
      if (body.length < AVRO_REGISTERED_HEADER_LENGTH || body[0] !== 0) {
        throw decodeFailure(
          `the body is not registered Avro: it must start with a zero byte and a 4-byte schema id (${bodyPreview(body)})`,
        )
      }
      const id = Buffer.from(body.buffer, body.byteOffset, body.byteLength).readUInt32BE(1)
      const type = types.get(id)
      if (type === undefined) {
        throw decodeFailure(
          `the body names Avro schema id ${id}, which this codec does not know (it knows ${[...types.keys()].join(', ')})`,
        )
      }
      return decodeAvro(
        type,
        body.subarray(AVRO_REGISTERED_HEADER_LENGTH),
        `Avro binary (schema id ${id})`,
      ) as T
    },
  })
}
