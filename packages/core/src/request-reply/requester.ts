import { randomUUID } from 'node:crypto'
import { toMillis, type Duration } from '../duration.js'
import { readEnvelope, type Envelope } from '../envelope/envelope.js'
import { AceMqError, ClosedError, ConfigurationError, abortError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { HealthReport } from '../health/health.js'
import { assertName, encodeMessage, type MessagingHost } from '../publisher/messaging-host.js'
import { setLongTimeout, type LongTimeout } from '../internal/timers.js'
import type { RequestSettledInfo } from '../telemetry/instrumentation.js'
import type {
  Declaration,
  Delivery,
  Headers,
  TransportEvent,
  TransportSubscription,
} from '../transport/transport.js'
import {
  DEFAULT_REQUEST_TIMEOUT,
  REPLY_QUEUE_EXPIRES,
  REPLY_QUEUE_PREFIX,
  REPLY_TO_HEADER,
} from './reply-wire.js'

/** Options for `mq.requester()`. */
export interface RequesterOptions {
  /** How long a request waits for its reply unless it says otherwise (default 30 s). */
  readonly timeout?: Duration
  /** The content type requests are encoded with (default `application/json`). */
  readonly contentType?: string
}

/** Options for one request. */
export interface RequestOptions {
  /** How long to wait for the reply (default: the requester's); more than 0. */
  readonly timeout?: Duration
  /** Abandons the wait: the request rejects with an `AbortError`, a later reply is dropped. */
  readonly signal?: AbortSignal
  /** The request's envelope id (default a new UUID); the reply's correlation. */
  readonly id?: string
  /** The request's business correlation. */
  readonly correlation?: string
  /** Application headers (no `x-acemq-*`). */
  readonly headers?: Headers
}

/** A reply with its envelope, from {@link Requester.requestMessage}. */
export interface Reply<T> {
  readonly payload: T
  readonly envelope: Envelope
  /** Application headers of the reply. */
  readonly headers: Headers
}

/** The responder's handler failed, or its reply could not be encoded: `reason` says which. */
export class ResponderError extends AceMqError {
  constructor(
    readonly requestId: string,
    readonly reason: string,
  ) {
    super(`the responder could not answer request ${requestId}: ${reason}`, {
      code: ErrorCodes.RESPONDER_FAILED,
    })
    this.name = 'ResponderError'
  }
}

/** No reply came within the request's timeout. */
export class RequestTimeoutError extends AceMqError {
  constructor(
    readonly requestId: string,
    readonly timeoutMs: number,
  ) {
    super(`no reply to request ${requestId} within ${timeoutMs} ms`, {
      code: ErrorCodes.REQUEST_TIMEOUT,
    })
    this.name = 'RequestTimeoutError'
  }
}

interface Pending {
  readonly destination: string
  readonly startedAt: number
  readonly resolve: (reply: Reply<unknown>) => void
  readonly reject: (error: unknown) => void
  timer: LongTimeout | undefined
  stopListening: (() => void) | undefined
}

/**
 * Sends requests and waits for their replies on a reply queue of its own,
 * `acemq.reply.{uuid}` (classic, `x-expires` 10 minutes), declared on the first request.
 * Every request settles exactly once: with its reply, an error reply (`ResponderError`),
 * `UnroutableError` at once when no queue takes it, `RequestTimeoutError`, an `AbortError`,
 * or a connection error when the connection drops or closes while it waits. A reply nobody
 * waits for (late, duplicate) is dropped and counted in {@link unmatched}.
 *
 * @example
 * ```ts
 * const requester = mq.requester({ timeout: '5s' })
 * const price = await requester.request<Quote, Price>('', 'pricing', { sku: 'a-1' })
 * ```
 */
export class Requester implements AsyncDisposable {
  /** The queue replies come back on. */
  readonly replyQueue: string = `${REPLY_QUEUE_PREFIX}${randomUUID()}`
  readonly #host: MessagingHost
  readonly #timeoutMs: number
  readonly #contentType: string | undefined
  readonly #pending = new Map<string, Pending>()
  readonly #stopEvents: () => void
  readonly #unregisterHealth: () => void
  #started: Promise<TransportSubscription> | undefined
  #closed = false
  #answered = 0
  #timedOut = 0
  #unmatched = 0
  #failed = 0

  /** Created by `mq.requester()`. @internal */
  constructor(host: MessagingHost, options: RequesterOptions = {}) {
    this.#host = host
    this.#timeoutMs = positiveTimeout(
      options.timeout ?? DEFAULT_REQUEST_TIMEOUT,
      'requester(options.timeout)',
    )
    if (options.contentType !== undefined && host.codecs.find(options.contentType) === undefined) {
      throw new ConfigurationError(
        `requester(options.contentType): no codec is registered for ${JSON.stringify(options.contentType)}`,
      )
    }
    this.#contentType = options.contentType
    this.#stopEvents = host.transport.onEvent((event) => this.#onEvent(event))
    this.#unregisterHealth = host.registerHealth({
      name: `requester:${this.replyQueue}`,
      report: () => this.#report(),
    })
  }

  /** Replies that resolved their request. */
  get answered(): number {
    return this.#answered
  }
  /** Requests that got no reply in time. */
  get timedOut(): number {
    return this.#timedOut
  }
  /** Replies nobody waited for (late, duplicate, or for an earlier requester): dropped. */
  get unmatched(): number {
    return this.#unmatched
  }
  /** Requests that ended otherwise: an error reply, unroutable, aborted, connection lost, closed. */
  get failed(): number {
    return this.#failed
  }
  /** Requests waiting for their reply now. */
  get waiting(): number {
    return this.#pending.size
  }

  /**
   * Publishes `payload` (confirmed, mandatory) with this requester's reply address and
   * resolves to the reply's payload.
   *
   * @example
   * ```ts
   * const total = await requester.request<Cart, number>('', 'carts.total', cart, { timeout: '2s' })
   * ```
   */
  async request<TReq = unknown, TRes = unknown>(
    exchange: string,
    routingKey: string,
    payload: TReq,
    options: RequestOptions = {},
  ): Promise<TRes> {
    const reply = await this.requestMessage<TReq, TRes>(exchange, routingKey, payload, options)
    return reply.payload
  }

  /**
   * As {@link request}, resolving to the reply with its envelope and headers.
   *
   * @example
   * ```ts
   * const { payload, envelope } = await requester.requestMessage('', 'pricing', { sku: 'a-1' })
   * ```
   */
  async requestMessage<TReq = unknown, TRes = unknown>(
    exchange: string,
    routingKey: string,
    payload: TReq,
    options: RequestOptions = {},
  ): Promise<Reply<TRes>> {
    assertName(exchange, 'request(exchange)')
    assertName(routingKey, 'request(routingKey)')
    const timeoutMs =
      options.timeout === undefined
        ? this.#timeoutMs
        : positiveTimeout(options.timeout, 'request(options.timeout)')
    const signal = options.signal
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new ConfigurationError(
        `request(options.signal) must be an AbortSignal; got ${String(signal)}`,
      )
    }
    if (this.#closed) throw new ClosedError('this requester is closed')
    this.#host.assertOpen()
    const { message, envelope } = encodeMessage(this.#host, {
      exchange,
      routingKey,
      payload,
      contentType: this.#contentType,
      envelope: {
        ...(options.id !== undefined && { id: options.id }),
        ...(options.correlation !== undefined && { correlation: options.correlation }),
      },
      headers: { ...options.headers, [REPLY_TO_HEADER]: this.replyQueue },
      properties: { replyTo: this.replyQueue },
      argument: 'request(payload)',
    })
    if (signal?.aborted === true) throw abortError(signal)
    if (this.#pending.has(envelope.id)) {
      throw new ConfigurationError(
        `request(options.id): a request with id ${JSON.stringify(envelope.id)} is already waiting`,
      )
    }
    await this.#start()
    const destination = `${exchange}/${routingKey}`
    const reply = new Promise<Reply<TRes>>((resolve, reject) => {
      const pending: Pending = {
        destination,
        startedAt: Date.now(),
        resolve: resolve as (reply: Reply<unknown>) => void,
        reject,
        timer: undefined,
        stopListening: undefined,
      }
      // Waiting before the publish: a fast reply can come before the confirm.
      this.#pending.set(envelope.id, pending)
      pending.timer = setLongTimeout(() => {
        this.#settle(envelope.id, 'timed_out', new RequestTimeoutError(envelope.id, timeoutMs))
      }, timeoutMs)
      if (signal !== undefined) {
        const onAbort = (): void => this.#settle(envelope.id, 'failed', abortError(signal))
        signal.addEventListener('abort', onAbort, { once: true })
        pending.stopListening = () => signal.removeEventListener('abort', onAbort)
      }
    })
    // No queue bound (no responder): rejected now, not after the timeout.
    this.#host.transport.publish(message).catch((error: unknown) => {
      this.#settle(envelope.id, 'failed', error)
    })
    return reply
  }

  /**
   * Stops listening for replies: waiting requests reject with `ClosedError`, and the reply
   * queue is left to expire (10 minutes). Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#stopEvents()
    this.#unregisterHealth()
    this.#settleAll(() => new ClosedError('the requester closed while the request waited'))
    const subscription = await this.#started?.catch(() => undefined)
    // Left to expire: a recovery must not declare it again (and keep it for ten more minutes).
    this.#host.transport.forget?.([this.#replyQueueDeclaration()])
    await subscription?.close()
  }

  #replyQueueDeclaration(): Declaration {
    return {
      kind: 'queue',
      name: this.replyQueue,
      type: 'classic',
      durable: true,
      arguments: { 'x-expires': REPLY_QUEUE_EXPIRES },
    }
  }

  /** `await using requester = mq.requester()` closes it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  #start(): Promise<TransportSubscription> {
    this.#started ??= (async () => {
      const transport = this.#host.transport
      await transport.declare([this.#replyQueueDeclaration()])
      return transport.consume(this.replyQueue, { prefetch: 250 }, (delivery) =>
        this.#onReply(delivery),
      )
    })()
    // A failed start is tried again by the next request.
    this.#started.catch(() => (this.#started = undefined))
    return this.#started
  }

  #onReply(delivery: Delivery): void {
    delivery.ack()
    const { envelope, headers } = readEnvelope(delivery.headers, {
      messageId: delivery.properties.messageId,
      routingKey: delivery.routingKey,
    })
    // The family writes the request's id as the reply's correlation; a plain AMQP responder
    // writes the `correlation-id` property.
    const correlation =
      delivery.headers['x-acemq-correlation'] !== undefined
        ? envelope.correlation
        : (delivery.properties.correlationId ?? envelope.correlation)
    if (!this.#pending.has(correlation)) {
      this.#unmatched++
      this.#count({ destination: this.replyQueue, outcome: 'unmatched' })
      return
    }
    if (envelope.error !== undefined) {
      this.#settle(correlation, 'failed', new ResponderError(correlation, envelope.error))
      return
    }
    let payload: unknown
    try {
      const codec = this.#host.codecs.find(delivery.properties.contentType)
      if (codec === undefined) {
        throw new AceMqError(
          `the reply to request ${correlation} has content type '${delivery.properties.contentType ?? ''}', for which no codec is registered`,
          { code: ErrorCodes.DECODE },
        )
      }
      payload = codec.decode(delivery.body)
    } catch (error) {
      this.#settle(correlation, 'failed', error)
      return
    }
    this.#settle(correlation, 'answered', undefined, { payload, envelope, headers })
  }

  #settle(
    id: string,
    outcome: 'answered' | 'timed_out' | 'failed',
    error: unknown,
    reply?: Reply<unknown>,
  ): void {
    const pending = this.#pending.get(id)
    if (pending === undefined) return
    this.#pending.delete(id)
    pending.timer?.clear()
    pending.stopListening?.()
    if (outcome === 'answered') this.#answered++
    else if (outcome === 'timed_out') this.#timedOut++
    else this.#failed++
    this.#count({
      destination: pending.destination,
      outcome,
      ...(outcome === 'answered' && { durationMs: Date.now() - pending.startedAt }),
    })
    if (reply !== undefined) pending.resolve(reply)
    else pending.reject(error)
  }

  #settleAll(error: () => Error): void {
    for (const id of [...this.#pending.keys()]) this.#settle(id, 'failed', error())
  }

  #onEvent(event: TransportEvent): void {
    if (event.type === 'disconnected') {
      // The reply may never come (the responder's publish can be lost with the connection):
      // every waiting caller is told now rather than at its timeout.
      this.#settleAll(
        () =>
          new AceMqError('the connection was lost while the request waited for its reply', {
            code: ErrorCodes.CONNECTION_DOWN,
            cause: event.error,
          }),
      )
    } else if (event.type === 'closed') {
      this.#settleAll(() => new ClosedError('the connection closed while the request waited'))
    }
  }

  #count(info: Omit<RequestSettledInfo, 'role'>): void {
    this.#host.instrumentation?.requestSettled?.({ role: 'requester', ...info })
  }

  #report(): HealthReport {
    return {
      name: `requester:${this.replyQueue}`,
      status: 'UP',
      details: {
        answered: String(this.#answered),
        timed_out: String(this.#timedOut),
        unmatched: String(this.#unmatched),
        failed: String(this.#failed),
        waiting: String(this.#pending.size),
      },
    }
  }
}

function positiveTimeout(value: Duration, argument: string): number {
  const ms = toMillis(value, argument)
  if (ms <= 0) {
    throw new ConfigurationError(`${argument} must be more than 0; got ${JSON.stringify(value)}`)
  }
  return ms
}
