export { protobufCodec, type ProtobufCodecOptions } from './protobuf-codec.js'
