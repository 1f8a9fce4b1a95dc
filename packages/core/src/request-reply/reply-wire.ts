import { headerString } from '../headers/header-values.js'
import type { Headers } from '../transport/transport.js'

/**
 * The header a requester writes its reply queue in, beside the AMQP `reply-to` property; a
 * responder reads it first (docs/design.md §24). Shared by the family, so not `x-acemq-`.
 */
export const REPLY_TO_HEADER = 'acemq-reply-to'

/** Reply queues are `acemq.reply.{uuid}`. */
export const REPLY_QUEUE_PREFIX = 'acemq.reply.'

/** A reply queue's `x-expires`: a requester that dies leaves its queue behind for 10 minutes at most. */
export const REPLY_QUEUE_EXPIRES = 600_000

/** How long a request waits for its reply unless told otherwise: 30 s. */
export const DEFAULT_REQUEST_TIMEOUT = 30_000

/**
 * Where a request wants its reply: the `acemq-reply-to` header first, then the AMQP
 * `reply-to` property (which is all a plain amqplib client, or RabbitMQ's direct reply-to,
 * writes).
 */
export function replyAddress(headers: Headers, property: string | undefined): string | undefined {
  const header = headerString(headers[REPLY_TO_HEADER])
  if (header !== undefined && header !== '') return header
  return property === undefined || property === '' ? undefined : property
}
