// The service checks alone, for any test runner: nothing here imports vitest.
export * from './services.js'
