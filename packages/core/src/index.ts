export { AceMq, type AceMqOptions, type CloseOptions } from './ace-mq.js'
export * from './constants.js'
export * from './duration.js'
export * from './error-codes.js'
export {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  FatalError,
  PublishFailedError,
  PublishingPausedError,
  UNENCODABLE,
  UnroutableError,
  describeError,
} from './errors.js'
export { Ack, isAckResult, type AckResult } from './consumer/ack.js'
export { ConsumerOptions } from './consumer/consumer-options.js'
export type { Consumer } from './consumer/consumer.js'
export type { Handler, HandlerContext, Message } from './consumer/message.js'
export type { DeadLetterOutcome, DeadLetterReport, OnDeadLetter } from './consumer/dead-letter.js'
export type {
  BeforeHandleResult,
  ConsumeInterceptor,
  Interceptor,
  OutgoingPublish,
  PublishChanges,
  PublishInterceptor,
} from './consumer/interceptor.js'
export * from './codec/codec.js'
export * from './codec/codec-registry.js'
export {
  ENCRYPTED_CONTENT_TYPE,
  encryptedCodec,
  type EncryptedCodecOptions,
} from './codec/encrypted-codec.js'
export { KeyRing } from './codec/key-ring.js'
export {
  DEFAULT_CLAIM_CHECK_RETENTION,
  DEFAULT_CLAIM_CHECK_THRESHOLD,
  claimCheckCodec,
  type ClaimCheckCodecOptions,
} from './claim-check/claim-check-codec.js'
export type { ClaimCheckStore } from './claim-check/claim-check-store.js'
export { FileClaimCheckStore } from './claim-check/file-claim-check-store.js'
export * from './envelope/envelope.js'
export {
  toHealthJson,
  type HealthContributor,
  type HealthJson,
  type HealthReport,
  type HealthResult,
  type HealthSource,
  type HealthStatus,
} from './health/health.js'
export type {
  ClaimResult,
  ClaimingIdempotencyStore,
  IdempotencyStore,
} from './idempotency/idempotency-store.js'
export * from './idempotency/in-memory-idempotency-store.js'
export { Publisher, type PublisherOptions, type SendOptions } from './publisher/publisher.js'
export * from './outbox/outbox-record.js'
export {
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DEFAULT_OUTBOX_TABLE,
  type OutboxFailOptions,
  type OutboxFailure,
  type OutboxStats,
  type OutboxStore,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from './outbox/outbox-store.js'
export * from './outbox/in-memory-outbox-store.js'
export {
  OutboxRelay,
  DEFAULT_OUTBOX_BATCH,
  DEFAULT_OUTBOX_LAG_THRESHOLD,
  DEFAULT_OUTBOX_LEASE,
  DEFAULT_OUTBOX_MAX_RETRY_DELAY,
  DEFAULT_OUTBOX_POLL,
  DEFAULT_OUTBOX_RETRY_DELAY,
  type OutboxRelayOptions,
} from './outbox/outbox-relay.js'
export {
  Replay,
  ReplayStoppedError,
  LEGACY_REPLAY_COUNT_HEADER,
  REPLAY_COUNT_HEADER,
  REPLAYED_AT_HEADER,
  REPLAYED_FROM_HEADER,
  type PeekOptions,
  type ReplayMessage,
  type ReplayProgress,
  type ReplayRunOptions,
} from './replay/replay.js'
export type { GiveBack } from './replay/queue-reader.js'
export { OrderedConsumer } from './ordered/ordered-consumer.js'
export {
  OrderedQueue,
  OrderedQueueBuilder,
  DEFAULT_ORDERED_ATTEMPTS,
  DEFAULT_ORDERED_RETRY_DELAY,
  ORDERED_KEY_HEADER,
  type FailureMode,
  type OnFailureOptions,
} from './ordered/ordered-queue.js'
export {
  DEFAULT_PARTITIONS,
  MAX_PARTITIONS,
  partitionFor,
  partitionHash,
} from './ordered/partition.js'
export {
  MAX_BROKER_WAIT,
  deadLetterQueueName,
  parkedQueueName,
  rungQueueName,
} from './retry/queue-names.js'
export { Pipeline } from './pipeline/pipeline.js'
export {
  PipelineBuilder,
  type PipelineBuildOptions,
  type StepContext,
  type StepFunction,
} from './pipeline/pipeline-builder.js'
export { ROUTE_HEADERS, readRoute, routeHeaders, type Route } from './pipeline/route.js'
export * from './retry/retry-policy.js'
export {
  DEFAULT_SCHEDULE_PREFETCH,
  Scheduler,
  type DeliverOptions,
  type ScheduleOptions,
} from './scheduler/scheduler.js'
export {
  SCHEDULE_DUE_QUEUE,
  SCHEDULE_EXCHANGE,
  SCHEDULE_HEADERS,
  SCHEDULE_RETRY_MS,
  SCHEDULE_RUNGS,
  SMALLEST_RUNG_MS,
  rungFor,
  scheduleDeclarations,
  type ScheduleRung,
} from './scheduler/schedule-ladder.js'
export {
  Requester,
  RequestTimeoutError,
  ResponderError,
  type Reply,
  type RequestOptions,
  type RequesterOptions,
} from './request-reply/requester.js'
export { Responder, type RespondHandler, type RespondOptions } from './request-reply/responder.js'
export {
  DEFAULT_REQUEST_TIMEOUT,
  REPLY_QUEUE_EXPIRES,
  REPLY_QUEUE_PREFIX,
  REPLY_TO_HEADER,
} from './request-reply/reply-wire.js'
export type { StandardSchemaV1 } from './schema/standard-schema.js'
export {
  MAX_ISSUES_REASON_LENGTH,
  MAX_LISTED_ISSUES,
  SchemaValidationError,
  describeIssues,
  withSchema,
} from './schema/schema-validation.js'
export * from './telemetry/instrumentation.js'
export * from './shutdown/shutdown-on-signals.js'
export { Topology, type QueueOptions } from './topology/topology.js'
export {
  DEFAULT_QUORUM_DELIVERY_LIMIT,
  InMemoryTransport,
  type InMemoryTransportOptions,
  type SimulatedConnection,
  type StoredMessage,
} from './transport/in-memory/in-memory-transport.js'
export type * from './transport/transport.js'
export * from './archive/archive-store.js'
export {
  ArchiveReplayError,
  DEFAULT_ARCHIVE_PREFETCH,
  DEFAULT_ARCHIVE_RETRY_DELAY_MS,
  DeadLetterArchive,
  type ArchiveActionOptions,
  type ArchiveActionResult,
  type ArchiveCollector,
  type DeadLetterArchiveOptions,
} from './archive/dead-letter-archive.js'
