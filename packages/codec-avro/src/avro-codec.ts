import { ConfigurationError, type Codec } from '@acemq/core'
import { avroType, decodeAvro, encodeAvro, type AvroSchema } from './internal/avro-type.js'

/** Options of {@link avroCodec}. */
export interface AvroCodecOptions {
  /** The schema every body is written and read with: writer and reader are the same. */
  readonly schema: AvroSchema
}

/**
 * `avro/binary`: the Avro binary encoding of one value, with no header, as the Java and Go
 * AceMQ libraries write it. Both sides hold the schema (the body does not name it). Decoding a
 * body that is short, too long, or not of the schema throws an `AceMqError` with code
 * `ACEMQ_DECODE`; the consumer parks the message with the reason. Encoding a value that does not
 * fit the schema throws a `ConfigurationError` listing the fields.
 *
 * @example
 * ```ts
 * const orders = avroCodec({ schema: { type: 'record', name: 'OrderPlaced', fields: [
 *   { name: 'orderId', type: 'string' }, { name: 'totalCents', type: 'long' } ] } })
 * const mq = await connect(url, { codecs: CodecRegistry.defaults().with(orders) })
 * ```
 */
export function avroCodec<T = unknown>(options: AvroCodecOptions): Codec<T> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(`avroCodec(options) must be an object; got ${String(options)}`)
  }
  const type = avroType(options.schema, 'avroCodec(options.schema)')
  return Object.freeze({
    contentType: 'avro/binary',
    encode: (value: T): Uint8Array => encodeAvro(type, value),
    decode: (body: Uint8Array): T => decodeAvro(type, body, 'Avro binary') as T,
  })
}
