// The kit an adapter proves itself with: the conformance suites every store passes, the
// scenarios every transport passes, the health-endpoint contract, and the service checks.
// The suites are written for vitest; ./helpers (the service checks, eventually() and the
// RecordingTransport) needs no test runner.
export {
  AMQP_URL,
  DATABASE_URL,
  MYSQL_URL,
  REDIS_URL,
  requireMysql,
  requirePostgres,
  requireRabbit,
  requireRedis,
  requireService,
  SKIP_SERVICES_VARIABLE,
  skippingMissingServices,
  uniqueName,
} from './services/services.js'
export { eventually } from './helpers/eventually.js'
export {
  idempotencyStoreConformance,
  type ConformanceFactory,
  type ConformanceFixture,
  type ConformanceStoreOptions,
} from './stores/idempotency-conformance.js'
export {
  outboxStoreConformance,
  type OutboxConformanceFactory,
  type OutboxConformanceFixture,
  type OutboxConformanceOptions,
} from './stores/outbox-conformance.js'
export {
  familyTableScenarios,
  type FamilyTableDialect,
  type FamilyTableFixture,
} from './stores/family-tables.js'
export {
  storeReadinessScenarios,
  type ReadinessFixture,
  type ReadinessStore,
} from './stores/store-readiness.js'
export {
  closeScenario,
  engineScenarios,
  openScenario,
  type BrokerProbe,
  type InspectedMessage,
  type ScenarioConnection,
  type ScenarioTarget,
} from './transport/engine-scenarios.js'
export { edgeScenarios } from './transport/edge-scenarios.js'
export { shutdownScenarios } from './transport/shutdown-scenarios.js'
export {
  BasicOnlyStore,
  FailingReleaseStore,
  idempotencyScenarios,
} from './transport/idempotency-scenarios.js'
export {
  accountOn,
  accountsCovering,
  orderedScenarios,
  OrderLog,
  type Entry,
} from './transport/ordered-scenarios.js'
export { replayScenarios } from './transport/replay-scenarios.js'
export { pipelineScenarios } from './transport/pipeline-scenarios.js'
export { outboxScenarios, outboxStoreReplacing } from './transport/outbox-scenarios.js'
export { interceptorScenarios } from './transport/interceptor-scenarios.js'
export { deadLetterScenarios } from './transport/dead-letter-scenarios.js'
export { requestReplyScenarios } from './transport/request-reply-scenarios.js'
export { schedulerScenarios } from './transport/scheduler-scenarios.js'
export { transportParity, type ParityTarget } from './transport/transport-parity.js'
export { errorCodeParity, type ErrorCodeTarget } from './transport/error-code-parity.js'
export { RecordingTransport, type Settlement } from './transport/recording-transport.js'
export { inMemoryTarget } from './transport/in-memory-target.js'
export {
  expectHeadAnswers,
  getJson,
  healthEndpointContract,
  useInMemoryConnection,
  type HealthBody,
  type HealthEndpointFixture,
  type InMemoryConnection,
  type ServedHealth,
} from './health/health-endpoint-contract.js'
export { orderedHealthContract } from './health/ordered-health.js'
export {
  claimCheckStoreConformance,
  type ClaimCheckConformanceFactory,
  type ClaimCheckConformanceFixture,
} from './stores/claim-check-conformance.js'
export {
  archiveStoreConformance,
  type ArchiveConformanceFactory,
  type ArchiveConformanceFixture,
} from './stores/archive-conformance.js'
