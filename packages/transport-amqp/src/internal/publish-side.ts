import type { Channel, ChannelModel } from 'amqplib'
import {
  ConfigurationError,
  ConnectionBlockedError,
  ErrorCodes,
  PublishFailedError,
} from '@acemq/core'
import {
  abortError,
  describeError,
  type OutgoingMessage,
  type TransportPublishOptions,
} from '@acemq/core/spi'
import { closeChannelQuietly, closeModelQuietly, openShortLivedChannel } from './amqp-helpers.js'
import { ConfirmPublisher } from './confirm-publisher.js'
import { encodePublishesDirectly } from './publish-frames.js'
import { replyCode } from './declarations.js'
import type { Endpoint } from './endpoint.js'
import type { ManagedConnection } from './managed-connection.js'
import { Permits } from './permits.js'
import type { SideHost } from './side-host.js'

type LaneName = 'application' | 'engine'

/**
 * One confirm channel on the publish connection with its own confirm window. The engine's
 * retries and moves never share a channel (or a window) with application publishes, so an
 * application's bad publish cannot fail them, nor a full application window hold them back.
 */
interface PublishLane {
  readonly name: LaneName
  readonly permits: Permits
  publisher: ConfirmPublisher | undefined
  opening: boolean
}

/** The exchange a `404 NOT_FOUND` channel close names, if it names one. */
function missingExchange(error: unknown): string | undefined {
  if (replyCode(error) !== 404) return undefined
  return /no exchange '(.*)' in vhost/.exec(describeError(error))?.[1]
}

/**
 * The publishing half of the transport: the publish connection, its two confirm channels
 * (lanes) with their windows, the exchanges known to exist, and the broker's blocked state
 * (only a publishing connection is ever blocked).
 *
 * Recovery: a fresh publish connection forgets the known exchanges and opens both lanes again
 * before it counts as open; a lost one fails every publish waiting for a confirm (it may or may
 * not have been delivered) and clears the blocked state, which belonged to it.
 */
export class PublishSide {
  readonly #host: SideHost
  readonly #connection: ManagedConnection
  readonly #lanes: Readonly<Record<LaneName, PublishLane>>
  /** Exchanges a passive check (or our own declaration) has found; '' always exists. */
  readonly #knownExchanges = new Set<string>()
  readonly #exchangeChecks = new Map<string, Promise<boolean>>()
  readonly #waiters = new Set<() => void>()
  #blockedReason: string | undefined

  constructor(host: SideHost, maxUnconfirmed: number) {
    this.#host = host
    const lane = (name: LaneName): PublishLane => ({
      name,
      permits: new Permits(maxUnconfirmed),
      publisher: undefined,
      opening: false,
    })
    this.#lanes = { application: lane('application'), engine: lane('engine') }
    this.#connection = host.connection('publish', {
      setup: (model) => this.#openPublisher(model),
      up: () => host.refreshOpen(undefined),
      down: (error, willRecover) => this.#connectionLost(error, willRecover),
      blocked: (reason) => this.#blocked(reason),
      unblocked: () => this.#unblocked(),
      warn: (message) => host.warn(message),
    })
  }

  get isOpen(): boolean {
    return this.#connection.isOpen
  }

  /** The node the publish connection is on while it is open. */
  get node(): Endpoint | undefined {
    return this.#connection.node
  }

  get blockedReason(): string | undefined {
    return this.#blockedReason
  }

  /** Publishes waiting for their broker confirm, on both lanes. */
  get unconfirmed(): number {
    const { application, engine } = this.#lanes
    return (application.publisher?.outstanding ?? 0) + (engine.publisher?.outstanding ?? 0)
  }

  /** The first connect (one attempt): the connection and both lanes' confirm channels. */
  open(): Promise<void> {
    return this.#connection.open()
  }

  /** `exchange` was declared by this transport: publishes to it need no check. */
  exchangeDeclared(exchange: string): void {
    this.#knownExchanges.add(exchange)
  }

  /** See `AmqpTransport.publish`. */
  publish(message: OutgoingMessage, options: TransportPublishOptions): Promise<void> {
    let whenBlocked: 'reject' | 'wait'
    let lane: PublishLane
    try {
      validateMessage(message)
      whenBlocked = options.whenBlocked ?? 'reject'
      if (whenBlocked !== 'reject' && whenBlocked !== 'wait') {
        throw new ConfigurationError(
          `options.whenBlocked must be 'reject' or 'wait'; got ${JSON.stringify(whenBlocked)}`,
        )
      }
      const laneName = options.lane ?? 'application'
      if (laneName !== 'application' && laneName !== 'engine') {
        throw new ConfigurationError(
          `options.lane must be 'application' or 'engine'; got ${JSON.stringify(laneName)}`,
        )
      }
      lane = this.#lanes[laneName]
      if (options.signal?.aborted) throw abortError(options.signal)
      // The common case waits for nothing: write now, without the waiting loop's async frame
      // (one promise and a few microtask turns less per message).
      this.#assertCanPublish()
      const publisher = lane.publisher
      if (
        this.#blockedReason === undefined &&
        publisher !== undefined &&
        publisher.isOpen &&
        !publisher.needsDrain &&
        this.#exchangeKnown(message.exchange) &&
        lane.permits.tryAcquire()
      ) {
        try {
          // The permit now belongs to the pending publish, which returns it when it settles.
          return publisher.write(message)
        } catch (error) {
          lane.permits.release()
          throw error
        }
      }
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return this.#publishWhenReady(message, lane, whenBlocked, options.signal)
  }

  /**
   * The first part of closing: the blocked state ends, every outstanding and waiting publish
   * fails with `PublishFailedError`, and every publish waiting for a change wakes to fail.
   */
  stop(): void {
    this.#blockedReason = undefined
    this.#failUnconfirmed(
      () =>
        new PublishFailedError(
          `the transport to ${this.#host.description()} was closed before the broker confirmed the message, so it may or may not have been delivered`,
        ),
    )
    for (const lane of Object.values(this.#lanes)) lane.permits.rejectWaiters(this.#closedError())
    this.#wake()
  }

  /** The last part of closing: the connection (and its recovery) ends. Never throws. */
  closeConnection(): Promise<void> {
    return this.#connection.close()
  }

  /**
   * {@link PublishSide.publish} when it has to wait: for the exchange check, a permit, an
   * unblock, a drain or a channel.
   */
  async #publishWhenReady(
    message: OutgoingMessage,
    lane: PublishLane,
    whenBlocked: 'reject' | 'wait',
    signal: AbortSignal | undefined,
  ): Promise<void> {
    let holdsPermit = false
    const releasePermit = (): void => {
      if (holdsPermit) lane.permits.release()
      holdsPermit = false
    }
    try {
      for (;;) {
        this.#assertCanPublish()
        if (this.#blockedReason !== undefined) {
          releasePermit()
          if (whenBlocked === 'reject') throw new ConnectionBlockedError(this.#blockedReason)
          await this.#waitForChange(signal)
          continue
        }
        if (!this.#exchangeKnown(message.exchange)) {
          releasePermit()
          if (!(await withSignal(this.#checkExchange(message.exchange), signal))) {
            throw this.#exchangeNotFound(message.exchange)
          }
          continue
        }
        const publisher = lane.publisher
        if (publisher === undefined || !publisher.isOpen) {
          // The channel is being reopened on a live connection (a channel error closed it).
          await this.#waitForChange(signal)
          continue
        }
        if (!holdsPermit) {
          if (!lane.permits.tryAcquire()) {
            await lane.permits.acquire(signal)
            holdsPermit = true
            continue
          }
          holdsPermit = true
        }
        if (publisher.needsDrain) {
          await this.#waitForChange(signal)
          continue
        }
        const confirmed = publisher.write(message)
        // The permit now belongs to the pending publish, which returns it when it settles.
        holdsPermit = false
        return await confirmed
      }
    } finally {
      releasePermit()
    }
  }

  #exchangeKnown(exchange: string): boolean {
    return exchange === '' || this.#knownExchanges.has(exchange)
  }

  /** Whether `exchange` exists; concurrent first publishes to it share one check. */
  #checkExchange(exchange: string): Promise<boolean> {
    let check = this.#exchangeChecks.get(exchange)
    if (check === undefined) {
      check = this.#probeExchange(exchange).finally(() => this.#exchangeChecks.delete(exchange))
      this.#exchangeChecks.set(exchange, check)
    }
    return check
  }

  /**
   * A passive declare on a short-lived channel of the publish connection: a missing exchange
   * closes that channel (404), never a publish channel with confirms outstanding on it.
   */
  async #probeExchange(exchange: string): Promise<boolean> {
    const model = this.#connection.model
    if (model === undefined || !this.#connection.isOpen) {
      throw new PublishFailedError(
        `the connection to ${this.#host.description()} is down and recovering: the message was not sent`,
      )
    }
    let channel: Channel
    try {
      channel = await openShortLivedChannel(model, (message) => this.#host.warn(message))
    } catch (error) {
      throw this.#checkFailed(exchange, error)
    }
    try {
      await channel.checkExchange(exchange)
      if (this.#connection.model === model) this.#knownExchanges.add(exchange)
      return true
    } catch (error) {
      if (replyCode(error) === 404) return false
      throw this.#checkFailed(exchange, error)
    } finally {
      void closeChannelQuietly(channel)
    }
  }

  #checkFailed(exchange: string, error: unknown): PublishFailedError {
    if (this.#host.phase() === 'closed') return this.#closedError()
    return new PublishFailedError(
      `could not check that exchange '${exchange}' exists on ${this.#host.description()}, so the message was not sent: ${this.#host.scrub(describeError(error))}`,
      { cause: error instanceof Error ? this.#host.safeError(error) : error },
    )
  }

  #exchangeNotFound(exchange: string): PublishFailedError {
    return new PublishFailedError(
      `exchange '${exchange}' does not exist on ${this.#host.description()}: the message was not sent`,
      { code: ErrorCodes.EXCHANGE_NOT_FOUND },
    )
  }

  #closedError(): PublishFailedError {
    return new PublishFailedError(
      `the transport to ${this.#host.description()} is closed: the message was not sent`,
    )
  }

  #assertCanPublish(): void {
    const phase = this.#host.phase()
    if (phase === 'closed') throw this.#closedError()
    if (phase !== 'connected') {
      throw new PublishFailedError(
        `the transport to ${this.#host.description()} is not connected yet (call connect() first): the message was not sent`,
      )
    }
    if (!this.#connection.isOpen) {
      throw new PublishFailedError(
        `the connection to ${this.#host.description()} is down and recovering: the message was not sent`,
      )
    }
  }

  #wake(): void {
    const waiters = [...this.#waiters]
    this.#waiters.clear()
    for (const wake of waiters) wake()
  }

  /**
   * Waits for any change that may let a publish proceed (or fail): unblock, drain, channel,
   * loss, close.
   */
  #waitForChange(signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortError(signal))
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters.delete(wake)
        reject(abortError(signal))
      }
      const wake = (): void => {
        signal?.removeEventListener('abort', onAbort)
        resolve()
      }
      this.#waiters.add(wake)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  /** Opens both lanes' confirm channels on a fresh publish connection. */
  async #openPublisher(model: ChannelModel): Promise<void> {
    // A new connection may meet a broker that lost exchanges (a restart): check them again.
    this.#knownExchanges.clear()
    // Not corked: a pass of amqplib's multiplexer written as one writev saved CPU, but past
    // 16 KiB the corked socket refuses more and the pass waits for 'drain', and confirmed
    // throughput fell to 0.92–1.02 × a hand-written publisher against 1.03–1.14 × uncorked (the
    // same runs; transport README, "Writes").
    // Each publish's frames are written straight into one buffer, header keys encoded once
    // (the same bytes as amqplib's; what this encoder does not take, amqplib still writes).
    encodePublishesDirectly(model)
    await Promise.all(Object.values(this.#lanes).map((lane) => this.#openLane(lane, model)))
  }

  async #openLane(lane: PublishLane, model: ChannelModel): Promise<void> {
    const channel = await model.createConfirmChannel()
    const publisher: ConfirmPublisher = new ConfirmPublisher(channel, this.#host.description(), {
      settled: () => lane.permits.release(),
      drained: () => this.#wake(),
      closed: (error) => this.#publisherClosed(lane, publisher, model, error),
      warn: (message) => this.#host.warn(message),
    })
    lane.publisher = publisher
    this.#wake()
  }

  /** A lane's channel closed: reopen it if its connection is still up (a channel error). */
  #publisherClosed(
    lane: PublishLane,
    publisher: ConfirmPublisher,
    model: ChannelModel,
    error: Error | undefined,
  ): void {
    if (replyCode(error) === 404) {
      // An exchange seen before is gone: forget it (or, not knowing which, every one).
      const missing = missingExchange(error)
      if (missing === undefined) this.#knownExchanges.clear()
      else this.#knownExchanges.delete(missing)
    }
    if (lane.publisher !== publisher) return
    lane.publisher = undefined
    this.#wake()
    // A lost connection closes its channels before it reports itself closed: look again once
    // that has happened, and reopen only on a connection that is still up.
    setImmediate(() => {
      if (
        this.#host.phase() === 'closed' ||
        lane.opening ||
        lane.publisher !== undefined ||
        !this.#connection.isOpen ||
        this.#connection.model !== model
      ) {
        return
      }
      lane.opening = true
      this.#openLane(lane, model)
        .catch((reopenError: unknown) => {
          this.#host.warn(
            `could not reopen the ${lane.name} publish channel, so the publish connection is recycled: ${describeError(reopenError)}`,
          )
          if (this.#connection.model === model) void closeModelQuietly(model)
        })
        .finally(() => {
          lane.opening = false
          this.#wake()
        })
    })
  }

  #connectionLost(error: Error | undefined, willRecover: boolean): void {
    this.#failUnconfirmed(
      () =>
        new PublishFailedError(
          `the connection to ${this.#host.description()} was lost before the broker confirmed the message, so it may or may not have been delivered`,
          error === undefined ? {} : { cause: this.#host.safeError(error) },
        ),
    )
    this.#host.refreshOpen(error)
    // A blocked state belongs to the lost connection; the broker tells a new one again.
    if (this.#blockedReason !== undefined) {
      this.#blockedReason = undefined
      this.#host.emit({ type: 'unblocked' })
    }
    this.#wake()
    if (!willRecover) void this.#host.close()
  }

  /** Both lanes lose their channel: every publish waiting for its confirm fails. */
  #failUnconfirmed(failure: () => PublishFailedError): void {
    for (const lane of Object.values(this.#lanes)) {
      const publisher = lane.publisher
      lane.publisher = undefined
      publisher?.failAll(failure())
    }
  }

  #blocked(reason: string): void {
    if (this.#host.phase() === 'closed') return
    const changed = this.#blockedReason !== reason
    this.#blockedReason = reason
    if (changed) this.#host.emit({ type: 'blocked', reason })
  }

  #unblocked(): void {
    if (this.#blockedReason === undefined) return
    this.#blockedReason = undefined
    this.#host.emit({ type: 'unblocked' })
    this.#wake()
  }
}

function validateMessage(message: OutgoingMessage): void {
  if (typeof message !== 'object' || message === null) {
    throw new ConfigurationError(`message must be an object; got ${String(message)}`)
  }
  if (typeof message.exchange !== 'string') {
    throw new ConfigurationError(
      `message.exchange must be a string; got ${typeof message.exchange}`,
    )
  }
  if (typeof message.routingKey !== 'string') {
    throw new ConfigurationError(
      `message.routingKey must be a string; got ${typeof message.routingKey}`,
    )
  }
  if (!(message.body instanceof Uint8Array)) {
    throw new ConfigurationError(
      `message.body must be a Uint8Array (or Buffer); got ${typeof message.body}`,
    )
  }
  if (typeof message.headers !== 'object' || message.headers === null) {
    throw new ConfigurationError(
      `message.headers must be an object; got ${String(message.headers)}`,
    )
  }
  if (typeof message.properties !== 'object' || message.properties === null) {
    throw new ConfigurationError(
      `message.properties must be an object; got ${String(message.properties)}`,
    )
  }
}

/** `promise`, given up (with an `AbortError`) when `signal` aborts first. */
function withSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise
  if (signal.aborted) return Promise.reject(abortError(signal))
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal))
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error as Error)
      },
    )
  })
}
