import type { Channel, ChannelModel } from 'amqplib'
import { AceMqError, ClosedError, ConfigurationError, ErrorCodes, errorCodeOf } from '@acemq/core'
import {
  describeError,
  type Declaration,
  type Delivery,
  type TransportConsumeOptions,
  type TransportSubscription,
} from '@acemq/core/spi'
import { closeChannelQuietly, openShortLivedChannel, type Backoff } from './amqp-helpers.js'
import { BasicGetter } from './basic-get.js'
import {
  applyDeclaration,
  declarationFailed,
  declarationKey,
  describeDeclaration,
  replyCode,
  validateDeclaration,
} from './declarations.js'
import type { Endpoint } from './endpoint.js'
import type { ManagedConnection } from './managed-connection.js'
import type { SideHost } from './side-host.js'
import { AmqpSubscription } from './subscription.js'
import type { SubscriptionHost } from './subscription.js'
import { keepHeaderTables } from './wire-headers.js'

/**
 * The consuming half of the transport: the consume connection (which a broker alarm never
 * blocks), the declarations made so far, every live subscription, and the channel kept for
 * `basic.get`.
 *
 * Recovery: a fresh consume connection re-declares everything declared so far, in order, and
 * re-attaches every live subscription (with its original callback) before it counts as open.
 */
export class ConsumeSide {
  readonly #host: SideHost
  readonly #connection: ManagedConnection
  /** Called after each declaration the broker accepts (the publish side learns exchanges). */
  readonly #declared: (declaration: Declaration) => void
  /** Every declaration the broker accepted, by key, in the order first made: replayed after a reconnect. */
  readonly #declarations = new Map<string, Declaration>()
  readonly #subscriptions = new Set<AmqpSubscription>()
  readonly #subscriptionHost: SubscriptionHost
  readonly #getter = new BasicGetter(() => this.#usableModel('get a message'))
  #warnedAboutAmqplib = false

  constructor(
    host: SideHost,
    resubscribeBackoff: Backoff,
    declared: (declaration: Declaration) => void,
  ) {
    this.#host = host
    this.#declared = declared
    this.#connection = host.connection('consume', {
      setup: (model) => this.#setUpConnection(model),
      up: () => host.refreshOpen(undefined),
      down: (error, willRecover) => {
        host.refreshOpen(error)
        if (!willRecover) void host.close()
      },
      // Only a publishing connection is ever blocked; nothing to do for this one.
      blocked: () => undefined,
      unblocked: () => undefined,
      warn: (message) => host.warn(message),
    })
    this.#subscriptionHost = {
      consumerModel: () => (host.phase() === 'closed' ? undefined : this.#connection.model),
      replayDeclarations: (model) => this.#replayDeclarations(model),
      removed: (subscription) => this.#subscriptions.delete(subscription),
      resubscribeBackoff,
      lossOf: (model) => this.#connection.lossOf(model),
      scrub: (error) => host.safeError(error),
      warn: (message) => host.warn(message),
    }
  }

  get isOpen(): boolean {
    return this.#connection.isOpen
  }

  /** The node the consume connection is on while it is open. */
  get node(): Endpoint | undefined {
    return this.#connection.node
  }

  /** The first connect (one attempt). */
  open(): Promise<void> {
    return this.#connection.open()
  }

  /** See `AmqpTransport.declare`. */
  async declare(declarations: readonly Declaration[]): Promise<void> {
    if (!Array.isArray(declarations)) {
      throw new ConfigurationError(`declarations must be an array; got ${typeof declarations}`)
    }
    declarations.forEach((declaration, index) => validateDeclaration(declaration, index))
    if (declarations.length === 0) return
    const model = this.#usableModel('declare anything')
    let channel: Channel
    try {
      channel = await this.#openChannel(model)
    } catch (error) {
      throw this.#connectionTrouble(`could not open a channel to declare`, error)
    }
    try {
      for (const declaration of declarations) {
        try {
          await applyDeclaration(channel, declaration)
        } catch (error) {
          if (replyCode(error) !== undefined && this.#connection.model === model) {
            throw declarationFailed(declaration, error)
          }
          throw this.#connectionTrouble(
            `the connection was lost while declaring ${describeDeclaration(declaration)}`,
            error,
          )
        }
        this.#remember(declaration)
        this.#declared(declaration)
      }
    } finally {
      await closeChannelQuietly(channel)
    }
  }

  /** See `AmqpTransport.consume`. */
  async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    const prefetch: unknown = (options as Partial<TransportConsumeOptions> | undefined)?.prefetch
    if (
      typeof prefetch !== 'number' ||
      !Number.isInteger(prefetch) ||
      prefetch < 0 ||
      prefetch > 65_535
    ) {
      throw new ConfigurationError(
        `options.prefetch must be an integer from 0 to 65535; got ${String(prefetch)}`,
      )
    }
    if (typeof onDelivery !== 'function') {
      throw new ConfigurationError(`onDelivery must be a function; got ${typeof onDelivery}`)
    }
    const model = this.#usableModel(`subscribe to queue '${queue}'`)
    const onStatus: unknown = (options as Partial<TransportConsumeOptions>).onStatus
    if (onStatus !== undefined && typeof onStatus !== 'function') {
      throw new ConfigurationError(`options.onStatus must be a function; got ${typeof onStatus}`)
    }
    const subscription = new AmqpSubscription(
      this.#subscriptionHost,
      queue,
      prefetch,
      onDelivery,
      onStatus as TransportConsumeOptions['onStatus'],
    )
    this.#subscriptions.add(subscription)
    try {
      await subscription.start(model)
    } catch (error) {
      this.#subscriptions.delete(subscription)
      const reply = replyCode(error)
      if (reply !== undefined && this.#connection.model === model) {
        // 404: the queue does not exist, the code getOne and queueLength (and the in-memory
        // transport) give for it too.
        const code = reply === 404 ? ErrorCodes.NOT_FOUND : ErrorCodes.CONSUME_FAILED
        throw new AceMqError(
          `could not subscribe to queue '${queue}' on ${this.#host.description()}: ${describeError(error)}`,
          { code, cause: error },
        )
      }
      throw this.#connectionTrouble(`could not subscribe to queue '${queue}'`, error)
    }
    return subscription
  }

  /** See `AmqpTransport.getOne`. */
  async getOne(queue: string): Promise<Delivery | undefined> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    try {
      return await this.#getter.get(queue)
    } catch (error) {
      throw this.#queueTrouble(`could not get a message from queue '${queue}'`, queue, error)
    }
  }

  /** See `AmqpTransport.queueLength`. */
  async queueLength(queue: string): Promise<number> {
    if (typeof queue !== 'string' || queue === '') {
      throw new ConfigurationError(`queue must be a non-empty string; got ${JSON.stringify(queue)}`)
    }
    try {
      return await this.#getter.queueLength(queue)
    } catch (error) {
      throw this.#queueTrouble(`could not count queue '${queue}'`, queue, error)
    }
  }

  /**
   * The first part of closing: the `basic.get` channel and every subscription's channel close
   * (unsettled deliveries go back to the queue). Never throws.
   */
  async stop(): Promise<void> {
    await this.#getter.close()
    const subscriptions = [...this.#subscriptions]
    this.#subscriptions.clear()
    await Promise.allSettled(subscriptions.map((subscription) => subscription.close()))
  }

  /** The last part of closing: the connection (and its recovery) ends. Never throws. */
  closeConnection(): Promise<void> {
    return this.#connection.close()
  }

  #queueTrouble(what: string, queue: string, error: unknown): Error {
    if (error instanceof Error && errorCodeOf(error) !== undefined) return error
    if (replyCode(error) === 404) {
      return new AceMqError(`queue '${queue}' does not exist on ${this.#host.description()}`, {
        code: ErrorCodes.NOT_FOUND,
        cause: error,
      })
    }
    return this.#connectionTrouble(what, error)
  }

  #usableModel(what: string): ChannelModel {
    const phase = this.#host.phase()
    if (phase === 'closed') {
      throw new ClosedError(
        `the transport to ${this.#host.description()} is closed: cannot ${what}`,
      )
    }
    if (phase !== 'connected') {
      throw new AceMqError(
        `the transport to ${this.#host.description()} is not connected yet (call connect() first): cannot ${what}`,
        { code: ErrorCodes.NOT_CONNECTED },
      )
    }
    const model = this.#connection.model
    if (!this.#connection.isOpen || model === undefined) {
      throw new AceMqError(
        `the connection to ${this.#host.description()} is down and recovering: cannot ${what}`,
        { code: ErrorCodes.CONNECTION_DOWN },
      )
    }
    return model
  }

  #connectionTrouble(what: string, error: unknown): AceMqError {
    if (this.#host.phase() === 'closed') {
      return new ClosedError(`the transport to ${this.#host.description()} was closed: ${what}`)
    }
    return new AceMqError(`${what} on ${this.#host.description()}: ${describeError(error)}`, {
      code: ErrorCodes.CONNECTION_DOWN,
      cause: error,
    })
  }

  #openChannel(model: ChannelModel): Promise<Channel> {
    return openShortLivedChannel(model, (message) => this.#host.warn(message))
  }

  /** See `AmqpTransport.forget`. */
  forget(declarations: readonly Declaration[]): void {
    for (const declaration of declarations) this.#declarations.delete(declarationKey(declaration))
  }

  #remember(declaration: Declaration): void {
    const key = declarationKey(declaration)
    if (!this.#declarations.has(key)) this.#declarations.set(key, declaration)
  }

  /**
   * Declares everything remembered, in order. A declaration the broker now refuses is reported
   * and skipped (the rest still matter); a lost connection aborts the replay.
   */
  async #replayDeclarations(model: ChannelModel): Promise<void> {
    let channel: Channel | undefined
    try {
      for (const declaration of [...this.#declarations.values()]) {
        channel ??= await this.#openChannel(model)
        try {
          await applyDeclaration(channel, declaration)
        } catch (error) {
          if (replyCode(error) === undefined || this.#connection.model !== model) throw error
          this.#host.warn(`${declarationFailed(declaration, error).message} (while re-declaring)`)
          // The refusal closed the channel.
          channel = undefined
        }
      }
    } finally {
      if (channel !== undefined) await closeChannelQuietly(channel)
    }
  }

  /** A fresh consume connection: declarations replayed, then every subscription re-attached. */
  async #setUpConnection(model: ChannelModel): Promise<void> {
    if (!keepHeaderTables(model) && !this.#warnedAboutAmqplib) {
      this.#warnedAboutAmqplib = true
      this.#host.warn(
        'this amqplib is not one whose frame reader the transport knows (2.x): copies of deliveries keep header values but not their integer widths',
      )
    }
    if (this.#declarations.size > 0) await this.#replayDeclarations(model)
    const subscriptions = [...this.#subscriptions]
    await Promise.all(subscriptions.map((subscription) => subscription.reattach(model)))
  }
}
