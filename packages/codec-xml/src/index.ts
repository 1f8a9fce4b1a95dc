export { xmlCodec, type XmlCodecOptions } from './xml-codec.js'
