export { tomlCodec } from './toml-codec.js'
