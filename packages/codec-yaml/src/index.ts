export { DEFAULT_MAX_ALIAS_COUNT, yamlCodec } from './yaml-codec.js'
