import { describeError } from '../errors.js'
import { isAckResult, type AckResult } from './ack.js'
import type { ConsumerHost } from './consumer-host.js'
import { withInterceptor, type ConsumeInterceptor } from './interceptor.js'
import type { Handler, Message } from './message.js'

/**
 * A consumer's interceptors (see {@link ConsumeInterceptor}): the connection's, read anew at each
 * delivery (one registered later still sees every message after it), merged with the
 * consumer's own by `order`, the connection's first among equals.
 */
export class ConsumeChain {
  readonly #host: ConsumerHost
  readonly #queue: string
  readonly #own: readonly ConsumeInterceptor[]
  /** The connection's list the merged one was made from. */
  #mergedFrom: readonly ConsumeInterceptor[] | undefined
  #merged: readonly ConsumeInterceptor[] = []

  constructor(host: ConsumerHost, queue: string, own: readonly ConsumeInterceptor[]) {
    this.#host = host
    this.#queue = queue
    this.#own = own
  }

  /** Every interceptor of this consumer, in the order they run (empty: none). */
  get list(): readonly ConsumeInterceptor[] {
    const connection = this.#host.interceptors
    if (this.#own.length === 0) return connection
    if (connection !== this.#mergedFrom) {
      this.#merged = this.#own.reduce(withInterceptor, connection)
      this.#mergedFrom = connection
    }
    return this.#merged
  }

  /** Runs every `beforeHandle`: the reason of the first refusal (or throw), or undefined. */
  async before(
    list: readonly ConsumeInterceptor[],
    message: Message<unknown>,
  ): Promise<string | undefined> {
    for (const interceptor of list) {
      if (interceptor.beforeHandle === undefined) continue
      try {
        const verdict = await interceptor.beforeHandle(message)
        if (verdict !== undefined && verdict !== null) return String(verdict.refuse)
      } catch (error) {
        return describeError(error)
      }
    }
    return undefined
  }

  /** Runs every `afterHandle`: the `Ack` the last one left. */
  async after(
    list: readonly ConsumeInterceptor[],
    message: Message<unknown>,
    ack: AckResult,
  ): Promise<AckResult> {
    let result = ack
    for (const interceptor of list) {
      if (interceptor.afterHandle === undefined) continue
      try {
        const replaced = await interceptor.afterHandle(message, result)
        if (replaced === undefined) continue
        if (isAckResult(replaced)) result = replaced
        else
          this.#failed(
            interceptor,
            'afterHandle',
            message,
            new TypeError(`returned ${String(replaced)}, which is not an Ack`),
          )
      } catch (error) {
        this.#failed(interceptor, 'afterHandle', message, error)
      }
    }
    return result
  }

  /** `handler`, telling every `onError` when it throws (the error still makes its `Ack`). */
  wrap<T>(handler: Handler<T>): Handler<T> {
    return async (message, context) => {
      try {
        return await handler(message, context)
      } catch (error) {
        for (const interceptor of this.list) {
          if (interceptor.onError === undefined) continue
          try {
            await interceptor.onError(message as Message<unknown>, error)
          } catch (failure) {
            this.#failed(interceptor, 'onError', message as Message<unknown>, failure)
          }
        }
        throw error
      }
    }
  }

  #failed(
    interceptor: ConsumeInterceptor,
    phase: string,
    message: Message<unknown>,
    error: unknown,
  ): void {
    const name = interceptor.name ?? 'interceptor'
    this.#host.instrumentation?.interceptorFailed?.({
      interceptor: name,
      phase,
      queue: this.#queue,
    })
    this.#host.reportError(
      error,
      `${name} failed in ${phase} of message ${message.envelope.id} on '${this.#queue}'; the result stands`,
    )
  }
}
