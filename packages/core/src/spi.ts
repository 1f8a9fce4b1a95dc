/**
 * `@acemq/core/spi`: what only the authors of adapters need — a store for a database, a
 * transport for a broker, a health endpoint for a web framework, a telemetry bridge. An
 * application never imports from here; everything it uses is in `@acemq/core`.
 *
 * The interfaces an adapter implements (`IdempotencyStore`, `OutboxStore`, `Transport`,
 * `Instrumentation`, `HealthContributor`) stay in `@acemq/core`, since applications name them
 * too; this entry point holds the helpers that make an adapter behave like the project's own.
 *
 * @example
 * ```ts
 * import type { ClaimingIdempotencyStore } from '@acemq/core'
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

// Transports and tools that declare the retry topology themselves.
export { rungArguments, validateQueueName } from './retry/queue-names.js'
export { consumerDeclarations } from './topology/topology.js'

// Claim-check stores check their arguments with these (docs/design.md §26).
export { assertClaimCheckKey, assertExpiresAt } from './claim-check/claim-check-store.js'
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
