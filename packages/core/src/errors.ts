/**
 * The root of every error AceMQ throws. `code` is stable across releases and across the
 * AceMQ family, so it is what to match on; `cause` carries the underlying error when there
 * is one.
 *
 * @example
 * ```ts
 * try { await orders.send(order) } catch (e) {
 *   if (e instanceof AceMqError && e.code === 'ACEMQ_UNROUTABLE') { ... }
 * }
 * ```
 */
export class AceMqError extends Error {
  /** A stable, machine-readable code such as `ACEMQ_UNROUTABLE`. */
  readonly code: string

  constructor(message: string, options: { readonly code?: string; readonly cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = options.code ?? 'ACEMQ_ERROR'
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
        code: 'ACEMQ_PUBLISHING_PAUSED',
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
      code: 'ACEMQ_CONNECTION_BLOCKED',
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
      { code: 'ACEMQ_UNROUTABLE' },
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
  constructor(message: string, options: { readonly cause?: unknown; readonly code?: string } = {}) {
    super(message, { code: 'ACEMQ_PUBLISH_FAILED', ...options })
  }
}

/**
 * The code of a {@link PublishFailedError} for a message the client cannot encode at all (a
 * header value it cannot write, a property too long): sending it again can never work.
 */
export const UNENCODABLE = 'ACEMQ_UNENCODABLE'

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
    super(message, { code: 'ACEMQ_FATAL', ...options })
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
    super(message, { code: 'ACEMQ_CONFIGURATION', ...options })
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
    super(message, { code: 'ACEMQ_CLOSED' })
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
