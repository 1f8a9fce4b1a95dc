import type { Consumer } from '../consumer/consumer.js'
import type { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Handler } from '../consumer/message.js'
import {
  createEnvelope,
  writeEnvelope,
  type Envelope,
  type EnvelopeInit,
} from '../envelope/envelope.js'
import { ConfigurationError, describeError } from '../errors.js'
import type { HealthContributor } from '../health/health.js'
import type { PublisherHost } from './publisher.js'
import type { Headers, MessageProperties, OutgoingMessage } from '../transport/transport.js'

/**
 * What request/reply and the scheduler need from their connection: the public engine
 * (`consume`, the transport) and the connection's codecs, origin and error hook. Internal.
 */
export interface MessagingHost extends PublisherHost {
  consume<T>(queue: string, options: ConsumerOptions, handler: Handler<T>): Promise<Consumer>
  registerHealth(contributor: HealthContributor): () => void
  reportError(error: unknown, context: string): void
}

/** What {@link encodeMessage} builds a message from. */
export interface MessageDraft {
  readonly exchange: string
  readonly routingKey: string
  readonly payload: unknown
  /** The content type to encode with (default: the registry's default, JSON). */
  readonly contentType?: string | undefined
  readonly envelope?: EnvelopeInit | undefined
  /** Application headers (no `x-acemq-*`). */
  readonly headers?: Headers | undefined
  /** Properties besides the content type and message id. */
  readonly properties?: MessageProperties | undefined
  /** `x-acemq-error` on the message (an error reply). */
  readonly error?: string | undefined
  /** The argument a refusal names, such as `request(payload)`. */
  readonly argument: string
}

/**
 * Encodes and envelopes one message, persistent and mandatory, ready for
 * `transport.publish`. A payload the codec refuses throws a `ConfigurationError` naming
 * `draft.argument` and the codec's reason.
 */
export function encodeMessage(
  host: MessagingHost,
  draft: MessageDraft,
): { readonly message: OutgoingMessage; readonly envelope: Envelope } {
  const codec = host.codecs.find(draft.contentType)
  if (codec === undefined) {
    throw new ConfigurationError(
      `${draft.argument}: no codec is registered for ${JSON.stringify(draft.contentType)}`,
    )
  }
  let body: Uint8Array
  try {
    body = codec.encode(draft.payload)
  } catch (error) {
    throw new ConfigurationError(
      `${draft.argument}: the ${codec.contentType} codec refused it: ${describeError(error)}`,
      { cause: error },
    )
  }
  const envelope = createEnvelope(draft.envelope, {
    routingKey: draft.routingKey,
    origin: host.origin,
  })
  const headers = writeEnvelope(
    envelope,
    draft.headers,
    draft.error === undefined ? undefined : { error: draft.error },
  )
  return {
    envelope,
    message: {
      exchange: draft.exchange,
      routingKey: draft.routingKey,
      body,
      headers,
      properties: { ...draft.properties, contentType: codec.contentType, messageId: envelope.id },
      persistent: true,
      mandatory: true,
    },
  }
}

/** Throws a `ConfigurationError` unless `value` is a string (at most 255 bytes, AMQP's limit). */
export function assertName(value: unknown, argument: string): asserts value is string {
  if (typeof value !== 'string' || Buffer.byteLength(value) > 255) {
    throw new ConfigurationError(
      `${argument} must be a string of at most 255 bytes; got ${typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : String(value)}`,
    )
  }
}
