export { createProgram, main, DEFAULT_URL } from './program.js'
export { EXIT_CODES } from './exit-codes.js'
export { parseRetry } from './retry-spec.js'
