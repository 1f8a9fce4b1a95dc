/**
 * `@acemq/core/spi`: what only the authors of adapters need — a store for a database, a
 * transport for a broker, a health endpoint for a web framework, a telemetry bridge. An
 * application never imports from here; everything it uses is in `@acemq/core`.
 *
 * The interfaces an application implements or passes in (`IdempotencyStore`, `OutboxStore`,
 * `Instrumentation`, `HealthContributor`, `Codec`) stay in `@acemq/core`; this entry point
 * holds the `Transport` seam and its types, the wire helpers and header names shared with the
 * other AceMQ libraries, the defaults, and the helpers that make an adapter behave like the
 * project's own.
 *
 * @example
 * ```ts
 * import type { IdempotencyStore } from '@acemq/core'
 * import type { ClaimingIdempotencyStore } from '@acemq/core/spi'
 * import { assertIdempotencyKey, assertOwnerToken, positiveMillis } from '@acemq/core/spi'
 * ```
 *
 * @packageDocumentation
 */

// Codecs: the error a body that cannot be read gives, and UTF-8 text that says so.
export { bodyPreview, decodeFailure, payloadKind, utf8Body } from './codec/codec-support.js'

// Transports: the AbortError a cancelled operation rejects with.
export { abortError } from './errors.js'

// Health endpoints: the whole HTTP answer, its parts, and the redaction every reply goes through.
export {
  healthAnswer,
  httpStatusOf,
  worstStatus,
  type HealthAnswer,
  type HealthErrorJson,
} from './health/health.js'

// Credential redaction: what every package passes its output through (health replies, errors,
// logs, the cli's lines).
export {
  REDACTED,
  isSecretName,
  passwordForms,
  passwordSpan,
  redactCredentials,
  redactSecrets,
  redactUrl,
} from './redaction/redact-credentials.js'

// Idempotency stores: the claim every store answers the same way, and the checks of its arguments.
export { claimWith, isClaimingStore } from './idempotency/idempotency-store.js'
export {
  assertIdempotencyKey,
  assertOwnerToken,
  functionOption,
  integerAtLeast,
  parseTableName,
  positiveMillis,
} from './idempotency/store-validation.js'
// SQL idempotency stores: the defaults they share, and when they purge.
export {
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
  PurgeCadence,
  reportPurgeFailure,
} from './idempotency/purge-cadence.js'
export {
  foreignIdempotencyTable,
  idempotencyTableLayout,
  idempotencyTableStatements,
  type IdempotencyTableLayout,
  type TableColumn,
} from './idempotency/idempotency-table-sql.js'
export { storeHealthContributor } from './idempotency/store-health.js'

// Outbox stores: the checks of their arguments and the mapping between a row and a record.
export {
  MAX_OUTBOX_REASON_LENGTH,
  OUTBOX_ROW_COLUMNS,
  assertClaimBatch,
  assertRenew,
  isMissingTableError,
  outboxColumns,
  outboxFailOptions,
  outboxIds,
  outboxLease,
  outboxMaxAttempts,
  outboxReason,
  outboxTableTrouble,
  outboxRecordFromRow,
  outboxRecordsOldestFirst,
  retiredOutboxRecordFromRow,
  type OutboxRow,
} from './outbox/outbox-store.js'
export {
  outboxReofferStatement,
  outboxRetiredStatement,
  outboxTableStatements,
  type OutboxStatement,
} from './outbox/outbox-table-sql.js'

// SQL stores and tools: the dialects, one checked option, and a migration script of statements.
export { SQL_DIALECTS, sqlDialect, sqlScript, type SqlDialect } from './sql/sql-dialect.js'
export { columnNumber } from './sql/sql-values.js'

// Transports and tools that declare the retry topology themselves.
export { rungArguments, validateQueueName } from './retry/queue-names.js'
export { consumerDeclarations } from './topology/topology.js'

// Claim-check stores check their arguments with these (docs/design.md §26).
export { assertClaimCheckKey, assertExpiresAt } from './claim-check/claim-check-store.js'

// The transport seam: what a transport implements and what it moves (docs/design.md §13).
export type {
  Declaration,
  Delivery,
  ExchangeType,
  MessageProperties,
  OutgoingMessage,
  SubscriptionStatus,
  Transport,
  TransportConsumeOptions,
  TransportEvent,
  TransportPublishOptions,
  TransportState,
  TransportSubscription,
  TypedInteger,
} from './transport/transport.js'
export {
  DEFAULT_QUORUM_DELIVERY_LIMIT,
  type SimulatedConnection,
  type StoredMessage,
} from './transport/in-memory/in-memory-transport.js'

// The wire: the envelope's headers and how they are read and written, the exchanges and queue
// names of the retry topology, and the headers of replay, ordered queues, pipelines,
// request/reply and the scheduler's ladder, shared with the other AceMQ libraries.
export {
  ENVELOPE_HEADERS,
  MAX_ID_BYTES,
  RESERVED_HEADER_PREFIX,
  assertApplicationHeaders,
  createEnvelope,
  defaultOrigin,
  envelopeAge,
  readEnvelope,
  writeCopyHeaders,
  writeEnvelope,
  type EnvelopeInit,
} from './envelope/envelope.js'
export { headerInteger, headerString } from './headers/header-values.js'
export { MAX_BROKER_WAIT, rungQueueName } from './retry/queue-names.js'
export type { RetryWait } from './retry/retry-policy.js'
export {
  DEFAULT_PARTITIONS,
  MAX_PARTITIONS,
  partitionFor,
  partitionHash,
} from './ordered/partition.js'
export {
  DEFAULT_ORDERED_ATTEMPTS,
  DEFAULT_ORDERED_RETRY_DELAY,
  ORDERED_KEY_HEADER,
} from './ordered/ordered-queue.js'
export { ROUTE_HEADERS, readRoute, routeHeaders, type Route } from './pipeline/route.js'
export {
  LEGACY_REPLAY_COUNT_HEADER,
  REPLAYED_AT_HEADER,
  REPLAYED_FROM_HEADER,
  REPLAY_COUNT_HEADER,
} from './replay/replay.js'
export {
  DEFAULT_REQUEST_TIMEOUT,
  REPLY_QUEUE_EXPIRES,
  REPLY_QUEUE_PREFIX,
  REPLY_TO_HEADER,
} from './request-reply/reply-wire.js'
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

// The defaults, named for the adapters and tools that reuse or show them.
export {
  DEAD_LETTER_EXCHANGE,
  DEFAULT_BROKER_WAIT_THRESHOLD,
  DEFAULT_CLAIM_TIMEOUT,
  DEFAULT_CONCURRENCY,
  DEFAULT_DRAIN_TIMEOUT,
  DEFAULT_ERROR_REPORT_INTERVAL,
  DEFAULT_HELD_TIMEOUT,
  DEFAULT_IDEMPOTENCY_RETENTION,
  DEFAULT_IN_PROGRESS_DELAY,
  DEFAULT_MAX_UNCONFIRMED,
  DEFAULT_PREFETCH,
  DEFAULT_RETRY_DELAY,
  DEFAULT_STORE_TIMEOUT,
  HANDLER_ABANDON_TIMEOUT,
  RETRY_EXCHANGE,
} from './constants.js'
export {
  DEFAULT_CLAIM_CHECK_RETENTION,
  DEFAULT_CLAIM_CHECK_THRESHOLD,
} from './claim-check/claim-check-codec.js'
export { DEFAULT_IDEMPOTENCY_MAX_ENTRIES } from './idempotency/in-memory-idempotency-store.js'
export {
  DEFAULT_OUTBOX_BATCH,
  DEFAULT_OUTBOX_LAG_THRESHOLD,
  DEFAULT_OUTBOX_LEASE,
  DEFAULT_OUTBOX_MAX_RETRY_DELAY,
  DEFAULT_OUTBOX_POLL,
  DEFAULT_OUTBOX_RETRY_DELAY,
} from './outbox/outbox-relay.js'
export { DEFAULT_SCHEDULE_PREFETCH } from './scheduler/scheduler.js'

// Durations as options are read, and errors as adapters describe them.
export { formatDuration, toMillis, type DurationUnit } from './duration.js'
export { isErrorCode } from './error-codes.js'
export { UNENCODABLE, describeError } from './errors.js'
export { isAckResult } from './consumer/ack.js'
export {
  MAX_ISSUES_REASON_LENGTH,
  MAX_LISTED_ISSUES,
  describeIssues,
} from './schema/schema-validation.js'

// Stores: the claiming idempotency store, and the outbox store's records and answers.
export type { ClaimingIdempotencyStore } from './idempotency/idempotency-store.js'
export {
  DEFAULT_OUTBOX_MAX_ATTEMPTS,
  DEFAULT_OUTBOX_TABLE,
  type OutboxFailOptions,
  type OutboxFailure,
  type OutboxStats,
  type RetiredOutboxRecord,
  type StoredOutboxRecord,
} from './outbox/outbox-store.js'
export type { OutboxEnvelope, OutboxHeaderValue } from './outbox/outbox-record.js'

// Telemetry bridges: what each Instrumentation member is told.
export type {
  ConsumeOutcome,
  InterceptorFailureInfo,
  OutboxRelayInfo,
  PipelineRunInfo,
  ProcessInfo,
  ProcessScope,
  PublishInfo,
  PublishOutcome,
  PublishScope,
  RequestSettledInfo,
  ScheduleEventInfo,
} from './telemetry/instrumentation.js'

// Health endpoints and shutdown wiring: what they read a connection through.
export type { HealthSource } from './health/health.js'
export type { Drainable, ShutdownHandle } from './shutdown/shutdown-on-signals.js'

// Dead-letter archive stores: one filter check, one cursor, one LIKE pattern, and the wire JSON
// every header and property is kept in.
export {
  archiveCursorAfter,
  checkArchiveFilter,
  likeContaining,
  type ArchiveCursor,
  type CheckedArchiveFilter,
} from './archive/archive-filter.js'
export { decodeWireJson, encodeWireJson } from './archive/wire-json.js'
export { ARCHIVE_COLUMNS, archiveTableStatements } from './archive/archive-table-sql.js'
export {
  archiveAuditFromRow,
  archiveRowValues,
  archivedMessageFromRow,
} from './archive/archive-rows.js'

// Ages as people read them, for the cli and the console.
export { humanDuration } from './duration.js'

// Names an application rarely writes (it gets them from the connection's methods), and what a
// health endpoint or an archive store adapter needs.
export type { DeadLetterOutcome } from './consumer/dead-letter.js'
export type { GiveBack } from './replay/queue-reader.js'
export { OrderedConsumer } from './ordered/ordered-consumer.js'
export { OrderedQueueBuilder } from './ordered/ordered-queue.js'
export { PipelineBuilder } from './pipeline/pipeline-builder.js'
export {
  DEFAULT_ARCHIVE_PAGE_SIZE,
  DEFAULT_ARCHIVE_TABLE,
  MAX_ARCHIVE_PAGE_SIZE,
  type ArchiveAuditEntry,
  type ArchiveFilter,
  type ArchivePage,
  type ArchivedMessage,
  type ArchiveMark,
  type ArchiveStatus,
} from './archive/archive-store.js'
export {
  DEFAULT_ARCHIVE_PREFETCH,
  DEFAULT_ARCHIVE_RETRY_DELAY_MS,
  type ArchiveCollector,
  type DeadLetterArchiveOptions,
} from './archive/dead-letter-archive.js'
