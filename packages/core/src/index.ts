/**
 * `@acemq/core`: what an application names — the connection, consuming and publishing, the
 * codecs, the stores it passes in, the features built on the engine, health, shutdown and the
 * errors it catches. What only the author of a transport, a store, a health endpoint or a
 * telemetry bridge needs (the `Transport` seam and its types, the wire headers and queue
 * names, the defaults, the argument checks) is in `@acemq/core/spi` (docs/design.md §1).
 *
 * @example
 * ```ts
 * import { AceMq, ConsumerOptions, InMemoryTransport, RetryPolicy, Topology } from '@acemq/core'
 * ```
 *
 * @packageDocumentation
 */

// The connection.
export { AceMq, type AceMqOptions, type CloseOptions } from './ace-mq.js'
export type { Duration } from './duration.js'
export {
  InMemoryTransport,
  type InMemoryTransportOptions,
} from './transport/in-memory/in-memory-transport.js'
export { Topology, type QueueOptions } from './topology/topology.js'
export { RetryPolicy } from './retry/retry-policy.js'
export { deadLetterQueueName, parkedQueueName } from './retry/queue-names.js'

// Errors: one root with a stable code, and the subclasses an application catches.
export { ErrorCodes, errorCodeOf, type ErrorCode } from './error-codes.js'
export {
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  FatalError,
  PublishFailedError,
  PublishingPausedError,
  UnroutableError,
} from './errors.js'

// Consuming.
export { Ack, type AckResult } from './consumer/ack.js'
export { ConsumerOptions } from './consumer/consumer-options.js'
export type { Consumer } from './consumer/consumer.js'
export type { Handler, HandlerContext, Message } from './consumer/message.js'
export type { DeadLetterReport, OnDeadLetter } from './consumer/dead-letter.js'
export type {
  BeforeHandleResult,
  ConsumeInterceptor,
  Interceptor,
  OutgoingPublish,
  PublishChanges,
  PublishInterceptor,
} from './consumer/interceptor.js'

// Publishing, and what a message carries.
export { Publisher, type PublisherOptions, type SendOptions } from './publisher/publisher.js'
export type { Envelope } from './envelope/envelope.js'
export type { HeaderValue, Headers } from './headers/header-values.js'

// Codecs and payloads.
export { bytesCodec, jsonCodec, textCodec, type Codec } from './codec/codec.js'
export { CodecRegistry } from './codec/codec-registry.js'
export {
  ENCRYPTED_CONTENT_TYPE,
  encryptedCodec,
  type EncryptedCodecOptions,
} from './codec/encrypted-codec.js'
export { KeyRing } from './codec/key-ring.js'
export { claimCheckCodec, type ClaimCheckCodecOptions } from './claim-check/claim-check-codec.js'
export type { ClaimCheckStore } from './claim-check/claim-check-store.js'
export { FileClaimCheckStore } from './claim-check/file-claim-check-store.js'
export type { StandardSchemaV1 } from './schema/standard-schema.js'
export { SchemaValidationError, withSchema } from './schema/schema-validation.js'

// Idempotency.
export type { ClaimResult, IdempotencyStore } from './idempotency/idempotency-store.js'
export {
  InMemoryIdempotencyStore,
  type InMemoryIdempotencyStoreOptions,
} from './idempotency/in-memory-idempotency-store.js'

// The transactional outbox.
export { OutboxRecord, type OutboxRecordOptions } from './outbox/outbox-record.js'
export type { OutboxStore } from './outbox/outbox-store.js'
export {
  InMemoryOutboxStore,
  type InMemoryOutboxStoreOptions,
} from './outbox/in-memory-outbox-store.js'
export { OutboxRelay, type OutboxRelayOptions } from './outbox/outbox-relay.js'

// Replay.
export {
  Replay,
  ReplayStoppedError,
  type PeekOptions,
  type ReplayMessage,
  type ReplayProgress,
  type ReplayRunOptions,
} from './replay/replay.js'

// Ordered queues and pipelines.
export { OrderedQueue, type FailureMode, type OnFailureOptions } from './ordered/ordered-queue.js'
export { Pipeline } from './pipeline/pipeline.js'
export {
  type PipelineBuildOptions,
  type StepContext,
  type StepFunction,
} from './pipeline/pipeline-builder.js'

// Request/reply and the scheduler.
export {
  Requester,
  RequestTimeoutError,
  ResponderError,
  type Reply,
  type RequestOptions,
  type RequesterOptions,
} from './request-reply/requester.js'
export { Responder, type RespondHandler, type RespondOptions } from './request-reply/responder.js'
export { Scheduler, type DeliverOptions, type ScheduleOptions } from './scheduler/scheduler.js'

// Dead letters kept off the broker: the opt-in archive an operator works from.
export {
  ArchiveReplayError,
  DeadLetterArchive,
  type ArchiveActionOptions,
  type ArchiveActionResult,
} from './archive/dead-letter-archive.js'
export type { DeadLetterArchiveStore } from './archive/archive-store.js'

// Health, telemetry and shutdown.
export {
  toHealthJson,
  type HealthContributor,
  type HealthJson,
  type HealthReport,
  type HealthResult,
  type HealthStatus,
} from './health/health.js'
export type { Instrumentation } from './telemetry/instrumentation.js'
export {
  shutdownOnSignals,
  type ShutdownOptions,
  type ShutdownResult,
} from './shutdown/shutdown-on-signals.js'
