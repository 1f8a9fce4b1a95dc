import type { Codec } from '../codec/codec.js'
import { toMillis, type Duration } from '../duration.js'
import type { CodecRegistry } from '../codec/codec-registry.js'
import {
  assertApplicationHeaders,
  createEnvelope,
  writeEnvelope,
  type Envelope,
  type EnvelopeInit,
} from '../envelope/envelope.js'
import { ConfigurationError, PublishFailedError, PublishingPausedError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { PublishInterceptor } from '../consumer/interceptor.js'
import { assertStandardSchema, validateWith } from '../schema/schema-validation.js'
import type { StandardSchemaV1 } from '../schema/standard-schema.js'
import type { Instrumentation, PublishOutcome, PublishScope } from '../telemetry/instrumentation.js'
import type { Headers, OutgoingMessage, Transport } from '../transport/transport.js'
import { afterPublish, beforePublish } from './publish-chain.js'

/** Options for a {@link Publisher}. */
export interface PublisherOptions {
  /** The content type to encode with (default `application/json`); a codec must be registered for it. */
  readonly contentType?: string
  /** Resolve even when no queue is bound for the message (default false: `UnroutableError`). */
  readonly allowUnroutable?: boolean
  /** Application headers put on every message (no `x-acemq-*`). */
  readonly headers?: Headers
}

/** What a single send may set: envelope fields and application headers. */
export interface SendOptions extends EnvelopeInit {
  /** Application headers for this message, added to the publisher's (no `x-acemq-*`). */
  readonly headers?: Headers
  /**
   * Deliver it after this delay, through the scheduler's ladder (docs/design.md §25): the send
   * resolves once the message is on the ladder; a control consumer (`mq.scheduler()
   * .startDelivering()`) publishes it when due, always mandatory.
   */
  readonly delay?: Duration
}

/** What a publisher needs from its connection. Internal to core. */
export interface PublisherHost {
  readonly transport: Transport
  readonly codecs: CodecRegistry
  readonly origin: string
  readonly instrumentation: Instrumentation | undefined
  readonly publishingPaused: boolean
  /** The connection's interceptors by order (`mq.intercept`): a new array at each change. */
  readonly interceptors: readonly PublishInterceptor[]
  assertOpen(): void
  reportError(error: unknown, context: string): void
  /** Puts a message on the scheduler's ladder (a send with `delay`). */
  schedule(
    delay: Duration,
    exchange: string,
    routingKey: string,
    payload: unknown,
    options: SendOptions & { readonly contentType: string },
  ): Promise<void>
}

/** A message encoded and enveloped, ready to publish. */
interface Prepared {
  readonly message: OutgoingMessage
  readonly id: string
  readonly correlation: string
}

/** A send's options when it gives none (not a new object per send). */
const NO_SEND_OPTIONS: SendOptions = Object.freeze({})

function outcomeOf(error: unknown): PublishOutcome {
  const code = errorCodeOf(error)
  if (code === ErrorCodes.UNROUTABLE) return 'unroutable'
  if (code === ErrorCodes.CONNECTION_BLOCKED || code === ErrorCodes.PUBLISHING_PAUSED) {
    return 'refused'
  }
  return 'failed'
}

/**
 * Publishes typed messages to one exchange and routing key. Every send is persistent,
 * mandatory and confirmed: it resolves once the broker has the message.
 *
 * @example
 * ```ts
 * const orders = mq.publisher<OrderPlaced>('', 'orders.placed')
 * // The business id as the envelope id: an idempotent consumer handles a resend once.
 * await orders.send(order, { id: order.id, correlation: 'checkout-42', headers: { 'x-tenant': 'acme' } })
 * ```
 */
export class Publisher<T> {
  readonly exchange: string
  readonly routingKey: string
  readonly #host: PublisherHost
  readonly #codec: Codec
  readonly #mandatory: boolean
  readonly #headers: Headers
  /** Reserved headers the library adds to each message (a pipeline's route headers). */
  readonly #reserved: ((envelope: Envelope) => Headers) | undefined
  readonly #options: PublisherOptions
  /** Set only on the copy {@link Publisher.withSchema} makes. */
  #schema: StandardSchemaV1 | undefined

  /**
   * Created by `mq.publisher()`.
   *
   * @internal
   */
  constructor(
    host: PublisherHost,
    exchange: string,
    routingKey: string,
    options: PublisherOptions = {},
    reserved?: (envelope: Envelope) => Headers,
  ) {
    if (typeof exchange !== 'string') {
      throw new ConfigurationError(
        `publisher(exchange) must be a string ('' for the default exchange); got ${String(exchange)}`,
      )
    }
    if (typeof routingKey !== 'string' || Buffer.byteLength(routingKey) > 255) {
      throw new ConfigurationError(
        `publisher(routingKey) must be a string of at most 255 bytes; got ${JSON.stringify(routingKey)}`,
      )
    }
    const codec = host.codecs.find(options.contentType)
    if (codec === undefined) {
      throw new ConfigurationError(
        `publisher(options.contentType): no codec is registered for ${JSON.stringify(options.contentType)}; register one with CodecRegistry.with()`,
      )
    }
    assertApplicationHeaders(options.headers, 'publisher(options.headers)')
    this.#host = host
    this.exchange = exchange
    this.routingKey = routingKey
    this.#codec = codec
    this.#mandatory = options.allowUnroutable !== true
    this.#headers = { ...(options.headers ?? {}) }
    this.#reserved = reserved
    this.#options = options
    this.#schema = undefined
  }

  /**
   * This publisher, validating every payload with `schema` (any Standard Schema: zod, valibot,
   * arktype…) before anything is written; the payload type is the schema's input, and what is
   * encoded is the schema's output. A payload the schema refuses rejects the send with a
   * `SchemaValidationError` (code `ACEMQ_INVALID_PAYLOAD`) naming the issues; `sendAll` writes
   * nothing when any payload is refused. Async schemas work.
   *
   * @example
   * ```ts
   * const orders = mq.publisher('', 'orders').withSchema(z.object({ id: z.string() }))
   * await orders.send({ id: 'o-1' })
   * ```
   */
  withSchema<S extends StandardSchemaV1>(schema: S): Publisher<StandardSchemaV1.InferInput<S>> {
    assertStandardSchema(schema, 'withSchema(schema)')
    const copy = new Publisher<StandardSchemaV1.InferInput<S>>(
      this.#host,
      this.exchange,
      this.routingKey,
      this.#options,
      this.#reserved,
    )
    copy.#schema = schema
    return copy
  }

  /**
   * Sends one message and resolves once the broker confirms it. Rejects with
   * `PublishingPausedError` or `ConnectionBlockedError` before anything is written,
   * `UnroutableError` when no queue took it, `PublishFailedError` on a nack or a lost
   * connection.
   */
  send(payload: T, options: SendOptions = NO_SEND_OPTIONS): Promise<void> {
    if (this.#schema !== undefined || this.#codec.encodeAsync !== undefined) {
      return this.#sendAsync(payload, options)
    }
    // Not async: the transport's promise is handed back as it is (one promise and an async
    // frame less per message); what #prepare refuses still rejects rather than throws.
    if (this.#schema !== undefined || this.#codec.encodeAsync !== undefined) {
      return this.#sendAsync(payload, options)
    }
    if (options.delay !== undefined) return this.#sendLater(payload, options)
    if (this.#host.interceptors.length > 0) return this.#sendIntercepted(payload, options)
    let prepared: Prepared
    try {
      prepared = this.#prepare(payload, options)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#publish(prepared)
  }

  /**
   * Sends many messages, writing them all before awaiting their confirms (the connection's
   * confirm window bounds how many are outstanding). Rejects with a `PublishFailedError`
   * saying `k of n were not confirmed` when any failed; its `cause` is an `AggregateError`.
   */
  async sendAll(payloads: readonly T[], options: SendOptions = {}): Promise<void> {
    if (!Array.isArray(payloads)) {
      throw new ConfigurationError(`sendAll(payloads) must be an array; got ${String(payloads)}`)
    }
    if (options.id !== undefined && payloads.length > 1) {
      throw new ConfigurationError(
        'sendAll(options.id): one id cannot be given to several messages',
      )
    }
    const schema = this.#schema
    if (schema !== undefined) {
      // Every payload is checked before the first is written (docs/design.md §26).
      payloads = (await Promise.all(
        payloads.map((payload) => validateWith(schema, payload)),
      )) as readonly T[]
    }
    const codec = this.#codec
    const bodies =
      codec.encodeAsync === undefined
        ? undefined
        : await Promise.all(
            payloads.map((payload) => codec.encodeAsync?.(payload) ?? codec.encode(payload)),
          )
    if (this.#host.interceptors.length > 0) {
      const sent = await Promise.allSettled(
        payloads.map((p, i) => this.#sendIntercepted(p, options, bodies?.[i])),
      )
      return this.#allConfirmed(sent, payloads.length)
    }
    const messages = payloads.map((payload, i) => this.#prepare(payload, options, bodies?.[i]))
    if (this.#host.publishingPaused) {
      // Refuse the whole batch before anything is written, counting each refusal.
      const refused = new PublishingPausedError(this.exchange, this.routingKey)
      for (const prepared of messages) this.#startScope(prepared)?.end('refused', refused)
      throw refused
    }
    const results = await Promise.allSettled(messages.map((message) => this.#publish(message)))
    this.#allConfirmed(results, payloads.length)
  }

  #allConfirmed(results: readonly PromiseSettledResult<void>[], count: number): void {
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []))
    if (failures.length > 0) {
      throw new PublishFailedError(`${failures.length} of ${count} were not confirmed`, {
        cause: new AggregateError(failures, `${failures.length} publishes failed`),
      })
    }
  }

  /**
   * A send with interceptors (see {@link PublishInterceptor}): `beforePublish` may replace the
   * envelope and the application headers, then the message is published as any other, then
   * `afterConfirm` or `onPublishError` is told. The body is encoded before them and kept.
   */
  async #sendIntercepted(payload: T, options: SendOptions, encoded?: Uint8Array): Promise<void> {
    const interceptors = this.#host.interceptors
    this.#host.assertOpen()
    assertApplicationHeaders(options.headers, 'send(options.headers)')
    const body = encoded ?? this.#codec.encode(payload)
    const publish = await beforePublish(interceptors, {
      exchange: this.exchange,
      routingKey: this.routingKey,
      envelope: createEnvelope(options, { routingKey: this.routingKey, origin: this.#host.origin }),
      headers:
        options.headers === undefined ? this.#headers : { ...this.#headers, ...options.headers },
    })
    const prepared = this.#prepared(publish.envelope, body, publish.headers)
    try {
      await this.#publish(prepared)
    } catch (error) {
      await afterPublish(this.#host, interceptors, publish, error)
      throw error
    }
    await afterPublish(this.#host, interceptors, publish)
  }

  /** A send whose payload is validated (withSchema) or encoded asynchronously (a claim check). */
  async #sendAsync(payload: T, options: SendOptions): Promise<void> {
    this.#host.assertOpen()
    const valid =
      this.#schema === undefined ? payload : ((await validateWith(this.#schema, payload)) as T)
    if (options.delay !== undefined) return this.#sendLater(valid, options)
    const body =
      this.#codec.encodeAsync === undefined ? undefined : await this.#codec.encodeAsync(valid)
    if (this.#host.interceptors.length > 0) return this.#sendIntercepted(valid, options, body)
    return this.#publish(this.#prepare(valid, options, body))
  }

  async #sendLater(payload: T, { delay, ...options }: SendOptions): Promise<void> {
    if (this.#host.publishingPaused) throw new PublishingPausedError(this.exchange, this.routingKey)
    assertApplicationHeaders(options.headers, 'send(options.headers)')
    const delayMs = toMillis(delay ?? 0, 'send(options.delay)')
    await this.#host.schedule(delayMs, this.exchange, this.routingKey, payload, {
      ...options,
      headers:
        options.headers === undefined ? this.#headers : { ...this.#headers, ...options.headers },
      contentType: this.#codec.contentType,
    })
  }

  #prepare(payload: T, options: SendOptions, encoded?: Uint8Array): Prepared {
    this.#host.assertOpen()
    assertApplicationHeaders(options.headers, 'send(options.headers)')
    const envelope = createEnvelope(options, {
      routingKey: this.routingKey,
      origin: this.#host.origin,
    })
    const body = encoded ?? this.#codec.encode(payload)
    return this.#prepared(
      envelope,
      body,
      options.headers === undefined ? this.#headers : { ...this.#headers, ...options.headers },
    )
  }

  #prepared(envelope: Envelope, body: Uint8Array, applicationHeaders: Headers): Prepared {
    const headers = writeEnvelope(envelope, applicationHeaders)
    if (this.#reserved !== undefined) Object.assign(headers, this.#reserved(envelope))
    return {
      id: envelope.id,
      correlation: envelope.correlation,
      message: {
        exchange: this.exchange,
        routingKey: this.routingKey,
        body,
        headers,
        properties: { contentType: this.#codec.contentType, messageId: envelope.id },
        persistent: true,
        mandatory: this.#mandatory,
      },
    }
  }

  #publish(prepared: Prepared): Promise<void> {
    const scope = this.#startScope(prepared)
    if (scope === undefined && !this.#host.publishingPaused) {
      // Nothing to report the outcome to: hand the transport's promise back as it is, without
      // another async frame (one promise and a few microtask turns less per message).
      try {
        return this.#host.transport.publish(prepared.message)
      } catch (error) {
        return Promise.reject(error as Error)
      }
    }
    return this.#publishReported(prepared.message, scope)
  }

  async #publishReported(message: OutgoingMessage, scope: PublishScope | undefined): Promise<void> {
    try {
      if (this.#host.publishingPaused)
        throw new PublishingPausedError(this.exchange, this.routingKey)
      await this.#host.transport.publish(message)
    } catch (error) {
      scope?.end(outcomeOf(error), error)
      throw error
    }
    scope?.end('confirmed')
  }

  #startScope(prepared: Prepared): PublishScope | undefined {
    return this.#host.instrumentation?.publishStarted({
      exchange: prepared.message.exchange,
      routingKey: prepared.message.routingKey,
      messageId: prepared.id,
      correlation: prepared.correlation,
      headers: prepared.message.headers,
    })
  }
}
