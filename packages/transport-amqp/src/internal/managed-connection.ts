import amqplib from 'amqplib'
import type { ChannelModel } from 'amqplib'
import { AceMqError, ErrorCodes, errorCodeOf } from '@acemq/core'
import { describeError } from '@acemq/core/spi'
import type { AmqpNodeOrder } from '../amqp-transport-options.js'
import type { ConnectionRole, Endpoint, NodeSet } from './endpoint.js'
import { sanitizeError, scrubSecrets } from './secrets.js'
import { backoffDelay, closeModelQuietly, type Backoff } from './amqp-helpers.js'
import { watchHeartbeats } from './heartbeat-watchdog.js'
import { attemptOrder } from './node-order.js'
import { describeHandshakeFailure } from './handshake-failure.js'
import { describeTlsFailure } from './tls-failure.js'

/** What a {@link ManagedConnection} asks of its owner. */
export interface ConnectionHooks {
  /**
   * Prepares a fresh connection (channels, declarations, consumers) before it counts as open.
   * A throw closes the connection and, after the first connect, schedules another attempt.
   */
  setup(model: ChannelModel): Promise<void>
  /** The connection is open (after setup). */
  up(): void
  /** An open connection (or one in setup) was lost. `willRecover` is false when recovery is off. */
  down(error: Error | undefined, willRecover: boolean): void
  blocked(reason: string): void
  unblocked(): void
  warn(message: string): void
}

type State = 'idle' | 'connecting' | 'open' | 'recovering' | 'closed'

/**
 * One AMQP connection that comes back: a first connect that fails fast, then, after every loss,
 * reconnect attempts with exponential backoff until `close()`. Every connection gets `error`
 * and `handler-error` listeners, so a broker-side failure never becomes an uncaught exception.
 *
 * With several nodes (a cluster), each attempt tries them one after another (see
 * {@link attemptOrder}: the node just lost goes last) until one answers; the backoff waits
 * between rounds. While heartbeats are on, a broker that stops sending without closing the
 * socket is noticed by {@link watchHeartbeats} and the connection counts as lost.
 *
 * The reconnect timer is deliberately **not** `unref()`ed: an open connection keeps the process
 * alive, and so must one that is coming back, or a consumer-only service would exit with code 0
 * in the middle of a broker restart. `close()` clears it.
 */
export class ManagedConnection {
  readonly #role: ConnectionRole
  readonly #nodes: NodeSet
  readonly #order: AmqpNodeOrder
  /** `undefined` when recovery is off. */
  readonly #backoff: Backoff | undefined
  readonly #connectTimeoutMs: number
  readonly #hooks: ConnectionHooks
  #state: State = 'idle'
  #model: ChannelModel | undefined
  #timer: NodeJS.Timeout | undefined
  #attempt = 0
  #lastError: Error | undefined
  /** The node of `#model`; after a loss, the node lost (tried last next time). */
  #node: Endpoint | undefined
  #stopWatching: () => void = () => undefined
  readonly #losses = new WeakMap<ChannelModel, Error>()

  constructor(
    role: ConnectionRole,
    nodes: NodeSet,
    order: AmqpNodeOrder,
    backoff: Backoff | undefined,
    connectTimeoutMs: number,
    hooks: ConnectionHooks,
  ) {
    this.#role = role
    this.#nodes = nodes
    this.#order = order
    this.#backoff = backoff
    this.#connectTimeoutMs = connectTimeoutMs
    this.#hooks = hooks
  }

  /** True once setup has finished on the current connection and until it is lost. */
  get isOpen(): boolean {
    return this.#state === 'open'
  }

  /** The current amqplib connection (also during setup), if any. */
  get model(): ChannelModel | undefined {
    return this.#model
  }

  /** The node the connection is on while it is open. */
  get node(): Endpoint | undefined {
    return this.isOpen ? this.#node : undefined
  }

  /** Why `model` (a connection this one held) was lost, once it has been: not scrubbed. */
  lossOf(model: ChannelModel): Error | undefined {
    return this.#losses.get(model)
  }

  /** The first connect: one attempt, no retries, so a misconfigured service fails at start-up. */
  async open(): Promise<void> {
    if (this.#state !== 'idle') {
      throw new AceMqError(
        `the ${this.#role} connection was already opened (it is ${this.#state}): open() is called once`,
        { code: ErrorCodes.INVALID_STATE },
      )
    }
    this.#state = 'connecting'
    let model: ChannelModel
    let node: Endpoint
    try {
      ;({ model, node } = await this.#connectToAny(undefined, true))
    } catch (error) {
      if (this.#state === 'connecting') this.#state = 'idle'
      throw error
    }
    if (this.#closed()) {
      await closeModelQuietly(model)
      throw new AceMqError(`the ${this.#role} connection was closed while it was opening`, {
        code: ErrorCodes.CLOSED,
      })
    }
    this.#adopt(model, node)
    try {
      await this.#hooks.setup(model)
    } catch (error) {
      this.#drop(model)
      if (!this.#closed()) this.#state = 'idle'
      throw errorCodeOf(error) !== undefined ? error : this.#connectFailed(node, error)
    }
    if (this.#model !== model) {
      throw new AceMqError(
        `the ${this.#role} connection to ${node.description} was lost while it was being set up`,
        { code: ErrorCodes.CONNECTION_FAILED, cause: this.#safe(this.#lastError) },
      )
    }
    this.#state = 'open'
    this.#hooks.up()
  }

  /** Closes the connection and stops recovery. Never throws; safe to call twice. */
  async close(): Promise<void> {
    this.#state = 'closed'
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
    this.#stopWatching()
    const model = this.#model
    this.#model = undefined
    if (model !== undefined) await closeModelQuietly(model)
  }

  /** Reads the state afresh (TypeScript narrows a field across awaits otherwise). */
  #closed(): boolean {
    return this.#state === 'closed'
  }

  #safe(error: unknown): unknown {
    return sanitizeError(error, this.#nodes.secrets)
  }

  /**
   * Why connecting to a node failed, in words, without a secret (TLS refusals, a refused
   * virtual host and a refused login explained).
   */
  #reason(error: unknown, node?: Endpoint): string {
    const explained =
      describeTlsFailure(error) ??
      (node === undefined
        ? undefined
        : describeHandshakeFailure(error, node.description, node.mechanism))
    return scrubSecrets(explained ?? describeError(error), this.#nodes.secrets)
  }

  #connectFailed(node: Endpoint, error: unknown): AceMqError {
    return new AceMqError(
      `could not open the ${this.#role} connection to ${node.description}: ${this.#reason(error, node)}`,
      { code: ErrorCodes.CONNECTION_FAILED, cause: this.#safe(error) },
    )
  }

  /**
   * Tries the nodes one after another (the one lost last) until one answers. Fails with an
   * error naming every node's failure when none does.
   */
  async #connectToAny(
    lost: Endpoint | undefined,
    first: boolean,
  ): Promise<{ model: ChannelModel; node: Endpoint }> {
    const order = attemptOrder(this.#nodes.nodes, this.#order, lost)
    const failures: { node: Endpoint; error: unknown }[] = []
    for (const node of order) {
      if (this.#closed() || (!first && this.#state !== 'recovering')) break
      try {
        const model = await this.#connect(node)
        if (failures.length > 0) {
          this.#hooks.warn(
            `the ${this.#role} connection is on ${node.description}; ${failures.map((failure) => `${failure.node.description} failed: ${this.#reason(failure.error, failure.node)}`).join('; ')}`,
          )
        }
        return { model, node }
      } catch (error) {
        failures.push({ node, error })
      }
    }
    const [only] = failures
    if (failures.length === 1 && only !== undefined)
      throw this.#connectFailed(only.node, only.error)
    if (failures.length === 0) {
      throw new AceMqError(`the ${this.#role} connection was closed while it was opening`, {
        code: ErrorCodes.CLOSED,
      })
    }
    throw new AceMqError(
      `could not open the ${this.#role} connection to any of the ${failures.length} nodes: ${failures.map((failure) => `${failure.node.description}: ${this.#reason(failure.error, failure.node)}`).join('; ')}`,
      { code: ErrorCodes.CONNECTION_FAILED, cause: this.#safe(failures.at(-1)?.error) },
    )
  }

  async #connect(node: Endpoint): Promise<ChannelModel> {
    const { target, socketOptions } = node.connectArguments(this.#role)
    const attempt = amqplib.connect(target, socketOptions)
    // amqplib's socket timeout covers a silent peer; this deadline also covers a handshake that
    // keeps trickling bytes. A connection that opens after the deadline is closed at once.
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`connect timed out after ${this.#connectTimeoutMs} ms`))
        attempt.then(closeModelQuietly, () => undefined)
      }, this.#connectTimeoutMs)
      timer.unref()
    })
    try {
      return await Promise.race([attempt, deadline])
    } finally {
      clearTimeout(timer)
    }
  }

  #adopt(model: ChannelModel, node: Endpoint): void {
    this.#model = model
    this.#node = node
    this.#lastError = undefined
    this.#stopWatching()
    this.#stopWatching = watchHeartbeats(model, (message) => {
      if (this.#model === model) {
        this.#hooks.warn(`the ${this.#role} connection to ${node.description}: ${message}`)
      }
    })
    model.on('error', (error: Error) => {
      if (this.#model === model) this.#lastError = error
    })
    model.on('handler-error', (error: Error, event: string) => {
      this.#hooks.warn(
        `a listener for the ${this.#role} connection's '${event}' event threw: ${describeError(error)}`,
      )
    })
    model.on('blocked', (reason: string) => {
      if (this.#model === model) this.#hooks.blocked(String(reason))
    })
    model.on('unblocked', () => {
      if (this.#model === model) this.#hooks.unblocked()
    })
    model.on('close', (error?: Error) => this.#lost(model, error ?? this.#lastError))
  }

  /** Forgets `model` without treating it as a loss, and closes it. */
  #drop(model: ChannelModel): void {
    if (this.#model === model) {
      this.#model = undefined
      this.#stopWatching()
    }
    void closeModelQuietly(model)
  }

  #lost(model: ChannelModel, error: Error | undefined): void {
    if (error !== undefined) this.#losses.set(model, error)
    if (this.#model !== model) return
    this.#model = undefined
    this.#stopWatching()
    if (this.#state === 'closed') return
    // The first connect reports its own failure (open() sees the model is gone).
    if (this.#state === 'connecting') {
      this.#lastError = error
      return
    }
    const willRecover = this.#backoff !== undefined
    // A connection lost during setup was never reported as open, but the owner has already
    // reported the earlier loss; either way it learns that this one is gone.
    this.#state = willRecover ? 'recovering' : 'closed'
    this.#hooks.down(error, willRecover)
    if (willRecover) this.#schedule()
  }

  #schedule(): void {
    const backoff = this.#backoff
    if (backoff === undefined || this.#state !== 'recovering' || this.#timer !== undefined) return
    this.#attempt += 1
    const delay = backoffDelay(backoff, this.#attempt)
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.#reconnect()
    }, delay)
  }

  async #reconnect(): Promise<void> {
    if (this.#state !== 'recovering') return
    let model: ChannelModel
    let node: Endpoint
    try {
      ;({ model, node } = await this.#connectToAny(this.#node, false))
    } catch (error) {
      if (this.#attempt === 1) {
        this.#hooks.warn(
          `reconnecting the ${this.#role} connection failed (will keep trying): ${scrubSecrets(describeError(error), this.#nodes.secrets)}`,
        )
      }
      this.#schedule()
      return
    }
    if (this.#state !== 'recovering') {
      await closeModelQuietly(model)
      return
    }
    this.#adopt(model, node)
    try {
      await this.#hooks.setup(model)
    } catch (error) {
      if (this.#model === model) {
        this.#hooks.warn(
          `setting up the recovered ${this.#role} connection on ${node.description} failed (will retry): ${scrubSecrets(describeError(error), this.#nodes.secrets)}`,
        )
        this.#drop(model)
        this.#schedule()
      }
      return
    }
    // Lost (or closed) during setup: #lost already scheduled the next attempt.
    if (this.#model !== model || this.#state !== 'recovering') return
    this.#attempt = 0
    this.#state = 'open'
    this.#hooks.up()
  }
}
