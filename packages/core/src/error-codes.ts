/**
 * Every `code` an AceMQ error (or an `AceMqWarning`) can carry, as constants: the closed set
 * to match on. A code never changes meaning across releases or across the AceMQ family;
 * `docs/errors.md` in the repository says what each one means and what to do about it.
 *
 * Match on the code, not on the class: `errorCodeOf(e) === ErrorCodes.UNROUTABLE` holds for
 * an error thrown by any installed copy of `@acemq/core`, where `instanceof` holds only for
 * the copy whose class it names.
 *
 * @example
 * ```ts
 * try { await orders.send(order) } catch (e) {
 *   if (errorCodeOf(e) === ErrorCodes.UNROUTABLE) await declareTopology()
 * }
 * ```
 */
export const ErrorCodes = Object.freeze({
  /** No more precise code applies; the message says what failed. */
  ERROR: 'ACEMQ_ERROR',
  /** An argument or option is not valid; the message names it and the value. */
  CONFIGURATION: 'ACEMQ_CONFIGURATION',
  /** The connection, consumer or relay was closed, so the operation cannot run. */
  CLOSED: 'ACEMQ_CLOSED',
  /** Thrown by a handler (`FatalError`): never retry, dead-letter at once. */
  FATAL: 'ACEMQ_FATAL',
  /** A body the codec cannot decode; the message is parked. */
  DECODE: 'ACEMQ_DECODE',
  /** A payload its schema refused: dead-lettered without retry when consumed, not sent when published. */
  INVALID_PAYLOAD: 'ACEMQ_INVALID_PAYLOAD',
  /** A publish was not confirmed (nacked, or the connection went while it was in flight). */
  PUBLISH_FAILED: 'ACEMQ_PUBLISH_FAILED',
  /** A publish the client cannot encode at all: sending it again can never work. */
  UNENCODABLE: 'ACEMQ_UNENCODABLE',
  /** A mandatory publish no queue is bound for. */
  UNROUTABLE: 'ACEMQ_UNROUTABLE',
  /** A publish to an exchange that does not exist; nothing was written. */
  EXCHANGE_NOT_FOUND: 'ACEMQ_EXCHANGE_NOT_FOUND',
  /** Publishing is paused (`pausePublishing()`); nothing was written. */
  PUBLISHING_PAUSED: 'ACEMQ_PUBLISHING_PAUSED',
  /** The broker blocked the connection (low on memory or disk); nothing was written. */
  CONNECTION_BLOCKED: 'ACEMQ_CONNECTION_BLOCKED',
  /** A queue that does not exist: consumed, taken from or counted. */
  NOT_FOUND: 'ACEMQ_NOT_FOUND',
  /** The broker refused a declaration: the queue or exchange exists otherwise, or an argument is invalid. */
  DECLARATION_FAILED: 'ACEMQ_DECLARATION_FAILED',
  /** The broker refused a subscription for another reason than a missing queue. */
  CONSUME_FAILED: 'ACEMQ_CONSUME_FAILED',
  /** The transport was used before `connect()`. */
  NOT_CONNECTED: 'ACEMQ_NOT_CONNECTED',
  /** No broker node accepted the connection. */
  CONNECTION_FAILED: 'ACEMQ_CONNECTION_FAILED',
  /** The connection is down and recovering: the operation was not done. */
  CONNECTION_DOWN: 'ACEMQ_CONNECTION_DOWN',
  /** The channel a delivery came on closed before it was settled. */
  CHANNEL_CLOSED: 'ACEMQ_CHANNEL_CLOSED',
  /** The idempotency store did not answer within the store timeout. */
  STORE_TIMEOUT: 'ACEMQ_STORE_TIMEOUT',
  /** A store's table does not exist: create it (the message says how). */
  STORE_TABLE_MISSING: 'ACEMQ_STORE_TABLE_MISSING',
  /** The database's answer does not say whether a write happened. */
  STORE_RESULT_UNKNOWN: 'ACEMQ_STORE_RESULT_UNKNOWN',
  /** A row kept changing under a claim; given up after a few rounds. */
  STORE_CONTENDED: 'ACEMQ_STORE_CONTENDED',
  /** A store found its rows in a state its own writes cannot make. */
  STORE_INCONSISTENT: 'ACEMQ_STORE_INCONSISTENT',
  /** An ordered queue's partition stopped on a message that kept failing. */
  PARTITION_HALTED: 'ACEMQ_PARTITION_HALTED',
  /** An object was asked for something its state does not allow: a defect, report it. */
  INVALID_STATE: 'ACEMQ_INVALID_STATE',
  /** Cancelling a consumer's subscription took over 5 s; its channel is closed instead. */
  CANCEL_TIMEOUT: 'ACEMQ_CANCEL_TIMEOUT',
  /** The transport lacks what the operation needs (replay without `getOne`). */
  UNSUPPORTED: 'ACEMQ_UNSUPPORTED',
  /** No reply came to a request within its timeout (docs/design.md §24). */
  REQUEST_TIMEOUT: 'ACEMQ_REQUEST_TIMEOUT',
  /** The responder's handler failed (or its reply could not be encoded): the reply says why. */
  RESPONDER_FAILED: 'ACEMQ_RESPONDER_FAILED',
  /** `shutdownOnSignals`' `onShutdown` threw or rejected. */
  ON_SHUTDOWN_THREW: 'ACEMQ_ON_SHUTDOWN_THREW',
  /** A consumer moved a message to `{queue}.dlq` or `{queue}.parked` (reported by the default `onDeadLetter`). */
  DEAD_LETTERED: 'ACEMQ_DEAD_LETTERED',
  /** An `AceMqWarning` for a failure that carried no code of its own. */
  FAILURE: 'ACEMQ_FAILURE',
  /** An `AceMqWarning` that says how many warnings of other kinds were not printed. */
  WARNINGS_HELD_BACK: 'ACEMQ_WARNINGS_HELD_BACK',
} as const)

/** One of {@link ErrorCodes}: every `code` an AceMQ error or warning carries. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes]

const CODES: ReadonlySet<unknown> = new Set(Object.values(ErrorCodes))

/**
 * Whether `value` is one of {@link ErrorCodes}.
 *
 * @example
 * ```ts
 * isErrorCode('ACEMQ_NOT_FOUND') // true
 * ```
 */
export function isErrorCode(value: unknown): value is ErrorCode {
  return CODES.has(value)
}

/**
 * The AceMQ code of anything thrown, or `undefined` when it carries none of
 * {@link ErrorCodes}. It reads the `code` property only, so an error from another installed
 * copy of `@acemq/core` (another class, the same code) answers the same: the engine decides
 * with it, never with `instanceof`.
 *
 * @example
 * ```ts
 * if (errorCodeOf(error) === ErrorCodes.FATAL) deadLetterNow()
 * ```
 */
export function errorCodeOf(error: unknown): ErrorCode | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const code: unknown = (error as { readonly code?: unknown }).code
  return isErrorCode(code) ? code : undefined
}
