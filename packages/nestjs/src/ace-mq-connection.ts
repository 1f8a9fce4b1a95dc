import {
  AceMqError,
  ErrorCodes,
  errorCodeOf,
  type AceMq,
  type ConsumerOptions,
  type Handler,
  type HealthResult,
  type PublisherOptions,
  type SendOptions,
  type Publisher,
} from '@acemq/core'
import { redactCredentials, type HealthSource } from '@acemq/core/spi'
import type { ResolvedConnectionOptions } from './module-options.js'

/** A consumer the module starts once the connection is made. */
export interface ConsumerRegistration {
  /** `ClassName.method`, for messages. */
  readonly label: string
  readonly queue: string
  readonly options: ConsumerOptions
  readonly handler: Handler<unknown>
}

/**
 * A publisher of a connection the application holds before the connection is made: it sends
 * through the connection once there is one and, until then, refuses at once
 * (`ACEMQ_NOT_CONNECTED`) rather than queue messages in memory.
 *
 * @example
 * ```ts
 * constructor(@InjectPublisher('orders') private readonly orders: ConnectionPublisher<OrderPlaced>) {}
 * await this.orders.send({ id: 'o-1' }, { id: 'o-1' })
 * ```
 */
export class ConnectionPublisher<T = unknown> {
  readonly #connection: AceMqConnection
  readonly #exchange: string
  readonly #routingKey: string
  readonly #options: PublisherOptions
  #publisher: { readonly mq: AceMq; readonly publisher: Publisher<T> } | undefined

  /** Use `connection.publisher()` or `@InjectPublisher()`. */
  constructor(
    connection: AceMqConnection,
    exchange: string,
    routingKey: string,
    options: PublisherOptions = {},
  ) {
    this.#connection = connection
    this.#exchange = exchange
    this.#routingKey = routingKey
    this.#options = options
  }

  /** The underlying publisher; throws `ACEMQ_NOT_CONNECTED` before the connection is made. */
  get publisher(): Publisher<T> {
    const mq = this.#connection.mq
    if (this.#publisher?.mq !== mq) {
      this.#publisher = {
        mq,
        publisher: mq.publisher<T>(this.#exchange, this.#routingKey, this.#options),
      }
    }
    return this.#publisher.publisher
  }

  /**
   * Publishes one message and resolves once the broker confirmed and routed it. Rejects with
   * `ACEMQ_NOT_CONNECTED` while the connection has not been made yet.
   */
  send(payload: T, options?: SendOptions): Promise<void> {
    try {
      return this.publisher.send(payload, options)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Publishes several messages, each confirmed. */
  sendAll(payloads: readonly T[], options?: SendOptions): Promise<void> {
    try {
      return this.publisher.sendAll(payloads, options)
    } catch (error) {
      return Promise.reject(error)
    }
  }
}

type State = 'idle' | 'connecting' | 'waiting' | 'connected' | 'closing' | 'closed'

/**
 * One named AceMQ connection of a Nest application, injectable everywhere (`@InjectAceMq()`):
 * it is there before the broker is reached, so an application whose broker is down at start
 * still boots. `mq` is the `AceMq` once connected; `health()` says `DOWN` until then.
 *
 * @example
 * ```ts
 * constructor(@InjectAceMq() private readonly acemq: AceMqConnection) {}
 * await this.acemq.mq.publisher('', 'orders.placed').send(order)
 * ```
 */
export class AceMqConnection implements HealthSource {
  /** The connection's name (`'default'` unless the module was given one). */
  readonly name: string
  readonly #options: ResolvedConnectionOptions
  readonly #log: (message: string) => void
  #mq: AceMq | undefined
  #state: State = 'idle'
  #consumers: readonly ConsumerRegistration[] = []
  #lastError: unknown
  #attempts = 0
  #retryTimer: NodeJS.Timeout | undefined
  #connecting: Promise<void> | undefined
  readonly #connectedWaiters = new Set<{
    readonly resolve: (mq: AceMq) => void
    readonly reject: (error: unknown) => void
  }>()

  /** Made by `AceMqModule`; not constructed by applications. */
  constructor(name: string, options: ResolvedConnectionOptions, log: (message: string) => void) {
    this.name = name
    this.#options = options
    this.#log = log
  }

  /** Whether the connection has been made (and not closed since). */
  get connected(): boolean {
    return this.#state === 'connected'
  }

  /**
   * The connection. Throws `AceMqError` with code `ACEMQ_NOT_CONNECTED` before it has been made
   * (a broker down at start with `failFast: false`): wait with {@link whenConnected}. While the
   * application shuts down it is still the connection, so a draining handler's publishes go
   * through; once closed, the connection itself refuses (`ACEMQ_CLOSED`).
   */
  get mq(): AceMq {
    if (this.#mq === undefined) {
      const closed = this.#state === 'closed' || this.#state === 'closing'
      throw new AceMqError(
        `AceMQ connection '${this.name}' ${closed ? 'was closed before it was made' : 'is not connected yet'}${this.#lastError === undefined ? '' : ` (last attempt: ${errorText(this.#lastError)})`}`,
        { code: closed ? ErrorCodes.CLOSED : ErrorCodes.NOT_CONNECTED },
      )
    }
    return this.#mq
  }

  /**
   * Resolves with the connection once it is made (at once when it is); rejects with
   * `ACEMQ_CLOSED` when the application shuts down before it was.
   */
  whenConnected(): Promise<AceMq> {
    if (this.#mq !== undefined) return Promise.resolve(this.#mq)
    if (this.#state === 'closed' || this.#state === 'closing') {
      return Promise.reject(this.#closedBeforeMade())
    }
    return new Promise((resolve, reject) => this.#connectedWaiters.add({ resolve, reject }))
  }

  #closedBeforeMade(): AceMqError {
    return new AceMqError(`AceMQ connection '${this.name}' was closed before it was made`, {
      code: ErrorCodes.CLOSED,
    })
  }

  /**
   * A publisher for one exchange and routing key that works before the connection is made
   * (it refuses then) and after.
   */
  publisher<T = unknown>(
    exchange: string,
    routingKey: string,
    options: PublisherOptions = {},
  ): ConnectionPublisher<T> {
    return new ConnectionPublisher<T>(this, exchange, routingKey, options)
  }

  /**
   * The connection's health: the `AceMq`'s once connected; before, `DOWN` with a `connection`
   * report saying it is connecting and why the last attempt failed.
   */
  async health(): Promise<HealthResult> {
    if (this.#mq !== undefined) return this.#mq.health()
    const details: Record<string, string> = { connected: 'false', state: this.#state }
    if (this.#attempts > 0) details.attempts = String(this.#attempts)
    if (this.#lastError !== undefined) details.error = errorText(this.#lastError)
    return {
      status: 'DOWN',
      inFlight: 0,
      reports: [{ name: 'connection', status: 'DOWN', details }],
    }
  }

  /**
   * Connects and starts `consumers`. When the first attempt fails: rejects if `failFast`,
   * otherwise resolves and tries again in the background.
   *
   * @internal
   */
  async start(consumers: readonly ConsumerRegistration[]): Promise<void> {
    if (this.#state !== 'idle') return
    this.#consumers = consumers
    await this.#attempt(true)
  }

  async #attempt(first: boolean): Promise<void> {
    if (this.#state === 'closing' || this.#state === 'closed') return
    this.#state = 'connecting'
    this.#attempts++
    let mq: AceMq
    try {
      mq = await this.#options.connect()
    } catch (error) {
      this.#lastError = error
      // Shut down while connecting: nothing to try again.
      if (this.#state !== 'connecting') return
      if (first && this.#options.failFast) {
        this.#state = 'closed'
        throw new AceMqError(
          `AceMQ connection '${this.name}' could not be made at start (failFast): ${errorText(error)}`,
          { code: ErrorCodes.CONNECTION_FAILED, cause: error },
        )
      }
      this.#scheduleRetry()
      return
    }
    if (this.#state !== 'connecting') {
      // Shut down while connecting: the connection is not wanted any more.
      await mq.close({ drainTimeout: 0 }).catch(() => undefined)
      return
    }
    try {
      await this.#setUp(mq)
    } catch (error) {
      // The broker answered but refused what the application declared: trying again would
      // not help, so this is said at bootstrap (or logged, after a late connection).
      this.#lastError = error
      this.#state = 'closed'
      await mq.close({ drainTimeout: 0 }).catch(() => undefined)
      if (first) throw error
      this.#log(`AceMQ connection '${this.name}' could not be set up: ${errorText(error)}`)
      return
    }
    this.#mq = mq
    this.#state = 'connected'
    this.#lastError = undefined
    if (!first) this.#log(`AceMQ connection '${this.name}' made after ${this.#attempts} attempts`)
    for (const waiter of this.#connectedWaiters) waiter.resolve(mq)
    this.#connectedWaiters.clear()
  }

  async #setUp(mq: AceMq): Promise<void> {
    const options = this.#options
    if (options.instrumentation !== undefined) mq.setInstrumentation(options.instrumentation)
    for (const contributor of options.healthContributors) mq.registerHealth(contributor)
    if (options.topology !== undefined) await mq.applyTopology(options.topology)
    await options.onConnected?.(mq)
    for (const consumer of this.#consumers) {
      try {
        await mq.consume(consumer.queue, consumer.options, consumer.handler)
      } catch (error) {
        throw new AceMqError(
          `@Consume('${consumer.queue}') on ${consumer.label} could not start: ${errorText(error)}`,
          { code: errorCodeOf(error) ?? ErrorCodes.ERROR, cause: error },
        )
      }
    }
  }

  #scheduleRetry(): void {
    const { retryInitialMs, retryMaxMs } = this.#options
    const delay = Math.min(retryMaxMs, retryInitialMs * 2 ** Math.min(this.#attempts - 1, 30))
    this.#state = 'waiting'
    this.#log(
      `AceMQ connection '${this.name}' not made (${errorText(this.#lastError)}); trying again in ${delay} ms`,
    )
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined
      this.#connecting = this.#attempt(false).catch((error: unknown) => {
        this.#log(`AceMQ connection '${this.name}': ${errorText(error)}`)
      })
    }, delay)
    this.#retryTimer.unref()
  }

  /**
   * Drains running handlers for up to the shutdown grace, then closes the connection (what
   * `mq.close({ drainTimeout })` does); stops trying to connect. Safe to call twice.
   *
   * @internal
   */
  async shutdown(): Promise<void> {
    if (this.#state === 'closed' || this.#state === 'closing') return
    const mq = this.#mq
    this.#state = 'closing'
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer)
    await this.#connecting
    for (const waiter of this.#connectedWaiters) waiter.reject(this.#closedBeforeMade())
    this.#connectedWaiters.clear()
    try {
      if (mq !== undefined) await mq.close({ drainTimeout: this.#options.shutdownGraceMs })
    } finally {
      this.#state = 'closed'
    }
  }
}

function errorText(error: unknown): string {
  return redactCredentials(error instanceof Error ? error.message : String(error))
}
