// The kit an adapter proves itself with: the conformance suites every store passes, the
// scenarios every transport passes, the health-endpoint contract, and the service checks.
// The suites are written for vitest; ./helpers (the service checks, eventually() and the
// RecordingTransport) needs no test runner.
export * from './services/services.js'
export * from './helpers/eventually.js'
export * from './stores/idempotency-conformance.js'
export * from './stores/outbox-conformance.js'
export * from './stores/store-readiness.js'
export * from './transport/engine-scenarios.js'
export * from './transport/edge-scenarios.js'
export * from './transport/shutdown-scenarios.js'
export * from './transport/idempotency-scenarios.js'
export * from './transport/ordered-scenarios.js'
export * from './transport/replay-scenarios.js'
export * from './transport/request-reply-scenarios.js'
export * from './transport/scheduler-scenarios.js'
export * from './transport/transport-parity.js'
export * from './transport/error-code-parity.js'
export * from './transport/recording-transport.js'
export * from './transport/in-memory-target.js'
export * from './health/health-endpoint-contract.js'
export * from './health/ordered-health.js'
