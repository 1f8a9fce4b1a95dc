import { ErrorCodes, type ErrorCode } from './error-codes.js'

/**
 * The root of every error AceMQ throws. `code` is stable across releases and across the
 * AceMQ family, so it is what to match on; `cause` carries the underlying error when there
 * is one. Match on the code with {@link errorCodeOf}, which also reads an error thrown by
 * another installed copy of `@acemq/core`, where `instanceof` would not hold.
 *
 * @example
 * ```ts
 * try { await orders.send(order) } catch (e) {
 *   if (errorCodeOf(e) === ErrorCodes.UNROUTABLE) { ... }
 * }
 * ```
 */
export class AceMqError extends Error {
  /** A stable, machine-readable code: one of {@link ErrorCodes}, such as `ACEMQ_UNROUTABLE`. */
  readonly code: ErrorCode

  constructor(
    message: string,
    options: { readonly code?: ErrorCode; readonly cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = options.code ?? ErrorCodes.ERROR
  }
}

/**
 * A publish was refused because {@link AceMq.pausePublishing} is in effect. Nothing was written.
 *
 * @example
 * ```ts
 * mq.pausePublishing()
 * await orders.send(order) // rejects with PublishingPausedError
 * ```
 */
export class PublishingPausedError extends AceMqError {
  constructor(
    readonly exchange: string,
    readonly routingKey: string,
  ) {
    super(
      `publishing is paused: nothing was sent to exchange '${exchange}' with routing key '${routingKey}'`,
      {
        code: ErrorCodes.PUBLISHING_PAUSED,
      },
    )
  }
}

/**
 * A publish was refused because the broker has blocked the connection (it is low on memory
 * or disk). Nothing was written; retry later, or let the caller's own back pressure work.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof ConnectionBlockedError) console.log(e.reason) }
 * ```
 */
export class ConnectionBlockedError extends AceMqError {
  constructor(readonly reason: string) {
    super(`the broker has blocked the connection (${reason}): the publish was refused`, {
      code: ErrorCodes.CONNECTION_BLOCKED,
    })
  }
}

/**
 * A mandatory publish was returned by the broker: no queue is bound for its routing key.
 *
 * @example
 * ```ts
 * await mq.publisher('', 'no-such-queue').send({}) // rejects with UnroutableError
 * ```
 */
export class UnroutableError extends AceMqError {
  constructor(
    readonly exchange: string,
    readonly routingKey: string,
    readonly replyText = 'NO_ROUTE',
  ) {
    super(
      `the broker could not route the message: exchange '${exchange || '(default)'}', routing key '${routingKey}' (${replyText})`,
      { code: ErrorCodes.UNROUTABLE },
    )
  }
}

/**
 * A publish was not confirmed: the broker nacked it, the channel or connection closed before
 * the confirm arrived, or the connection is down and recovering.
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof PublishFailedError) scheduleRetry() }
 * ```
 */
export class PublishFailedError extends AceMqError {
  constructor(
    message: string,
    options: { readonly cause?: unknown; readonly code?: ErrorCode } = {},
  ) {
    super(message, { code: ErrorCodes.PUBLISH_FAILED, ...options })
  }
}

/**
 * The code of a {@link PublishFailedError} for a message the client cannot encode at all (a
 * header value it cannot write, a property too long): sending it again can never work.
 *
 * @deprecated Use `ErrorCodes.UNENCODABLE`, the same value.
 */
export const UNENCODABLE = ErrorCodes.UNENCODABLE

/**
 * Thrown by a handler to say "never retry this": the message goes to `{queue}.dlq` with the
 * error's message as its reason, whatever the retry policy says.
 *
 * @example
 * ```ts
 * if (!order.customerId) throw new FatalError('order has no customer')
 * ```
 */
export class FatalError extends AceMqError {
  constructor(message: string, options: { readonly cause?: unknown } = {}) {
    super(message, { code: ErrorCodes.FATAL, ...options })
  }
}

/**
 * An argument or option is not valid. The message names the argument and the value.
 *
 * @example
 * ```ts
 * RetryPolicy.fixed(0, '1s') // throws ConfigurationError: maxAttempts must be ...
 * ```
 */
export class ConfigurationError extends AceMqError {
  constructor(message: string, options: { readonly cause?: unknown } = {}) {
    super(message, { code: ErrorCodes.CONFIGURATION, ...options })
  }
}

/**
 * The connection (or the consumer) is closed, so the operation cannot run.
 *
 * @example
 * ```ts
 * await mq.close(); await orders.send(order) // rejects with ClosedError
 * ```
 */
export class ClosedError extends AceMqError {
  constructor(message = 'the AceMQ connection is closed') {
    super(message, { code: ErrorCodes.CLOSED })
  }
}

/** Creates the `AbortError` (a `DOMException`) that Node and the web platform use for aborts. */
export function abortError(signal?: AbortSignal): Error {
  const reason: unknown = signal?.reason
  if (reason instanceof Error && reason.name === 'AbortError') return reason
  return new DOMException('The operation was aborted', 'AbortError')
}

/** Renders anything thrown as a one-line reason. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message || error.name
  if (typeof error === 'string') return error
  try {
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}
