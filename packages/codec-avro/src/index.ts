export { avroCodec, type AvroCodecOptions } from './avro-codec.js'
export {
  AVRO_REGISTERED_HEADER_LENGTH,
  registeredAvroCodec,
  type RegisteredAvroCodecOptions,
} from './registered-avro-codec.js'
export type { AvroSchema } from './internal/avro-type.js'
