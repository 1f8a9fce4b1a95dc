// The helpers that need no test runner: the service checks, eventually() and the
// RecordingTransport. Nothing here imports vitest, so node:test, Jest or Mocha can use them.
export * from '../services/services.js'
export { eventually } from './eventually.js'
export { RecordingTransport, type Settlement } from '../transport/recording-transport.js'
