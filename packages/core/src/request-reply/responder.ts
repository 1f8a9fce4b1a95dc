import type { Consumer } from '../consumer/consumer.js'
import { ConsumerOptions } from '../consumer/consumer-options.js'
import { RetryPolicy } from '../retry/retry-policy.js'
import type { HandlerContext, Message } from '../consumer/message.js'
import { ConfigurationError, FatalError, describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { HealthReport } from '../health/health.js'
import { encodeMessage, type MessagingHost } from '../publisher/messaging-host.js'
import { envelopeAge } from '../envelope/envelope.js'
import { replyAddress } from './reply-wire.js'

/** Options for `mq.respond()`: the consumer's options, and the replies' content type. */
export interface RespondOptions {
  /**
   * Retries, idempotency, prefetch: the responder is an ordinary consumer. Default:
   * `ConsumerOptions.defaults().withRetry(RetryPolicy.none())` — a failing request is
   * dead-lettered and its requester told at once, since a caller is waiting. Options without a
   * policy retry forever (the engine's default), so only a `FatalError` gets an error reply.
   */
  readonly consumer?: ConsumerOptions
  /** The content type replies are encoded with (default `application/json`). */
  readonly contentType?: string
}

/**
 * A handler that answers: its return value is the reply. Throwing follows the consumer's
 * retry policy; once the engine gives up, the requester gets an error reply naming the failure.
 */
export type RespondHandler<TReq, TRes> = (
  message: Message<TReq>,
  context: HandlerContext,
) => TRes | Promise<TRes>

/**
 * A responder: a consumer whose handler's return value is published (confirmed) to the
 * request's reply address before the request is acked.
 *
 * @example
 * ```ts
 * const pricing = await mq.respond<Quote, Price>('pricing', {}, async (m) => price(m.payload))
 * pricing.answered // replies confirmed
 * await pricing.close()
 * ```
 */
export class Responder {
  readonly queue: string
  #consumer: Consumer | undefined
  #answered = 0
  #unanswerable = 0
  #unregisterHealth: (() => void) | undefined

  /** Created by `mq.respond()`. @internal */
  constructor(queue: string) {
    this.queue = queue
  }

  /** Requests answered: the reply (or an error reply) was confirmed. */
  get answered(): number {
    return this.#answered
  }
  /** Requests that could not be answered: no reply address, an unencodable reply, a gone requester. */
  get unanswerable(): number {
    return this.#unanswerable
  }

  /** Stops responding (the consumer's close: drains, then cancels). */
  async close(options?: Parameters<Consumer['close']>[0]): Promise<void> {
    this.#unregisterHealth?.()
    await this.#consumer?.close(options)
  }

  /** @internal */
  async start<TReq, TRes>(
    host: MessagingHost,
    options: RespondOptions,
    handler: RespondHandler<TReq, TRes>,
  ): Promise<this> {
    const consumerOptions =
      options.consumer ?? ConsumerOptions.defaults().withRetry(RetryPolicy.none())
    if (!(consumerOptions instanceof ConsumerOptions)) {
      throw new ConfigurationError('respond(options.consumer) must be a ConsumerOptions')
    }
    if (typeof handler !== 'function') {
      throw new ConfigurationError(`respond(handler) must be a function; got ${String(handler)}`)
    }
    const contentType = options.contentType
    if (contentType !== undefined && host.codecs.find(contentType) === undefined) {
      throw new ConfigurationError(
        `respond(options.contentType): no codec is registered for ${JSON.stringify(contentType)}`,
      )
    }
    const policy = consumerOptions.retryPolicy
    const reply = async (
      message: Message<TReq>,
      address: string,
      draft: { payload: unknown; error?: string },
      outcome: 'answered' | 'unanswerable' = 'answered',
    ): Promise<void> => {
      const { message: outgoing } = encodeMessage(host, {
        exchange: '',
        routingKey: address,
        payload: draft.payload,
        contentType: draft.error === undefined ? contentType : undefined,
        envelope: { correlation: message.envelope.id, causation: message.envelope.id },
        properties: { correlationId: message.envelope.id },
        error: draft.error,
        argument: 'the reply',
      })
      try {
        await host.transport.publish(outgoing, { lane: 'engine' })
      } catch (error) {
        // The requester's queue is gone (it restarted, or its queue expired): nobody can be
        // answered, and trying the request again cannot change that.
        if (errorCodeOf(error) === ErrorCodes.UNROUTABLE) {
          this.#count('unanswerable')
          host.reportError(
            error,
            `respond(${this.queue}): the reply address ${address} no longer routes`,
          )
          return
        }
        throw error
      }
      this.#count(outcome)
    }
    this.#host = host
    this.#consumer = await host.consume<TReq>(
      this.queue,
      consumerOptions,
      async (message, context) => {
        const address = replyAddress(message.headers, message.replyTo)
        let result: TRes
        try {
          result = await handler(message, context)
        } catch (error) {
          // The requester hears of the failure once the engine gives up on the request, not at
          // every attempt: a retry may still answer it.
          // Without a policy the engine retries forever: only a FatalError ends the request.
          const last =
            errorCodeOf(error) === ErrorCodes.FATAL ||
            (policy !== undefined &&
              policy.nextWait(
                message.envelope.attempt,
                envelopeAge(message.envelope, Date.now()),
              ) === null)
          // A handler aborted by a closing consumer is not a failure to report: the request goes
          // back to the queue for another responder.
          if (last && address !== undefined && !context.signal.aborted) {
            const name = error instanceof Error ? error.name : 'Error'
            await reply(message, address, {
              payload: null,
              error: `${name}: ${describeError(error)}`,
            })
          }
          throw error
        }
        if (address === undefined) {
          this.#count('unanswerable')
          return
        }
        try {
          await reply(message, address, { payload: result })
        } catch (error) {
          if (errorCodeOf(error) !== ErrorCodes.CONFIGURATION) throw error
          // A reply the codec refuses: the requester is told why, and the request is set aside
          // (sending it again would only run the handler again to the same end).
          await reply(
            message,
            address,
            { payload: null, error: `the reply cannot be encoded: ${describeError(error)}` },
            'unanswerable',
          )
          throw new FatalError(`respond(${this.queue}): the reply cannot be encoded`, {
            cause: error,
          })
        }
      },
    )
    this.#unregisterHealth = host.registerHealth({
      name: `responder:${this.queue}`,
      report: () => this.#report(),
    })
    return this
  }

  #host: MessagingHost | undefined

  #count(outcome: 'answered' | 'unanswerable'): void {
    if (outcome === 'answered') this.#answered++
    else this.#unanswerable++
    this.#host?.instrumentation?.requestSettled?.({
      role: 'responder',
      destination: this.queue,
      outcome,
    })
  }

  #report(): HealthReport {
    return {
      name: `responder:${this.queue}`,
      status: 'UP',
      details: { answered: String(this.#answered), unanswerable: String(this.#unanswerable) },
    }
  }
}
