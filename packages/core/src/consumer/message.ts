import type { Envelope } from '../envelope/envelope.js'
import type { Headers } from '../transport/transport.js'
import type { AckResult } from './ack.js'

/**
 * A decoded message as a handler sees it.
 *
 * @example
 * ```ts
 * async (message: Message<OrderPlaced>) => {
 *   console.log(message.payload.id, message.envelope.attempt, message.headers['x-tenant'])
 * }
 * ```
 */
export interface Message<T> {
  /** The body, decoded by the codec its content type names. */
  readonly payload: T
  /** The `x-acemq-*` envelope: id, type, version, correlation, attempt, first seen, ... */
  readonly envelope: Envelope
  /** Application headers only (no `x-acemq-*`); `traceparent` and friends are here. */
  readonly headers: Readonly<Headers>
  /** The queue it was consumed from. */
  readonly queue: string
  /** The body's content type, as published. */
  readonly contentType: string | undefined
  /** The raw body. */
  readonly body: Uint8Array
  /** The broker says it delivered this message before. */
  readonly redelivered: boolean
  /** The AMQP `reply-to` property, when the message has one (a request: docs/design.md §24). */
  readonly replyTo?: string | undefined
}

/** What else a handler gets. */
export interface HandlerContext {
  /**
   * Fires when the consumer or the connection is closing and the drain time is over: pass it
   * to everything the handler awaits, or the handler is abandoned after 5 s.
   */
  readonly signal: AbortSignal
  /** The queue being consumed. */
  readonly queue: string
}

/**
 * A message handler. Returning (or `Ack.accept()`) acks; throwing retries; an
 * {@link AckResult} says exactly what to do.
 *
 * @example
 * ```ts
 * const handler: Handler<OrderPlaced> = async (message, { signal }) => {
 *   await fetch(`https://billing/orders/${message.payload.id}`, { method: 'POST', signal })
 * }
 * ```
 */
export type Handler<T> = (
  message: Message<T>,
  context: HandlerContext,
) => void | AckResult | Promise<void | AckResult>
