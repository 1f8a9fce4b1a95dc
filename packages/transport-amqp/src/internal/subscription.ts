import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib'
import {
  describeError,
  type Delivery,
  type MessageProperties,
  type SubscriptionStatus,
  type TransportSubscription,
} from '@acemq/core/spi'
import type { Headers } from '@acemq/core'
import { PROPERTY_NAMES, backoffDelay, closeChannelQuietly, type Backoff } from './amqp-helpers.js'
import { ChannelAcks, type AckSlot } from './channel-acks.js'
import { typedHeaders } from './wire-headers.js'

/** What a subscription needs from the transport that owns it. */
export interface SubscriptionHost {
  /** The consumer connection, while it is usable (open, or being set up after a reconnect). */
  consumerModel(): ChannelModel | undefined
  /** Declares everything declared so far again (the queue may have been deleted). */
  replayDeclarations(model: ChannelModel): Promise<void>
  /** The subscription has closed and no longer needs re-subscribing. */
  removed(subscription: AmqpSubscription): void
  readonly resubscribeBackoff: Backoff
  /** Why the consumer connection `model` was lost, once it has been, without any secret. */
  lossOf(model: ChannelModel): Error | undefined
  /** `error` without any secret. */
  scrub(error: Error | undefined): Error | undefined
  warn(message: string): void
}

/** A subscription's channel that closed on its own, and why (read when it is reported). */
interface ChannelLoss {
  error(): Error | undefined
}

/** One channel of one subscription. `open` turns false the moment it can no longer carry acks. */
interface ChannelLease {
  readonly model: ChannelModel
  readonly channel: Channel
  /** Its acknowledgements, batched (see {@link ChannelAcks}). */
  readonly acks: ChannelAcks
  open: boolean
}

/**
 * amqplib decodes every numeric field type to a JS number, and guesses a width when writing
 * one back: a large double (2^50 + 0.5), or a timestamp near 2^64 rounded up as it is read,
 * cannot be written again, so a retry or dead-letter copy would fail for ever. Only such values
 * are handed over as typed doubles, which write back; other headers are returned as they are.
 */
export function writableHeaders(headers: Headers): Headers {
  let copy: Headers | undefined
  for (const key in headers) {
    const value = headers[key]
    const fixed = writableValue(value)
    if (fixed !== value) {
      copy ??= { ...headers }
      copy[key] = fixed
    }
  }
  return copy ?? headers
}

const TWO_POW_50 = 2 ** 50
const TWO_POW_63 = 2 ** 63
const TWO_POW_64 = 2 ** 64

function writableValue(value: unknown): unknown {
  if (typeof value === 'number') {
    // amqplib writes a number below 2^63 that is whole, or at least 2^50, as a 64-bit integer:
    // a fraction there, or anything below -2^63, cannot be written that way.
    const unwritable = Number.isInteger(value)
      ? value < -TWO_POW_63
      : Math.abs(value) >= TWO_POW_50 && value < TWO_POW_63
    return unwritable ? { '!': 'double', value } : value
  }
  if (Array.isArray(value)) {
    let changed = false
    const items = value.map((item) => {
      const fixed = writableValue(item)
      if (fixed !== item) changed = true
      return fixed
    })
    return changed ? items : value
  }
  if (typeof value === 'object' && value !== null && !Buffer.isBuffer(value)) {
    if ('!' in value) {
      // A timestamp is read as a number, rounded: one near 2^64 reads back out of range.
      const typed = value as { readonly '!': unknown; readonly value: unknown }
      const n = typed.value
      if (typed['!'] === 'timestamp' && typeof n === 'number' && !(n >= 0 && n < TWO_POW_64)) {
        return { '!': 'double', value: n }
      }
      return value
    }
    return writableHeaders(value as Headers)
  }
  return value
}

function readProperties(message: ConsumeMessage): MessageProperties {
  const properties: Record<string, unknown> = {}
  const source = message.properties as unknown as Record<string, unknown>
  for (const name of PROPERTY_NAMES) {
    const value = source[name]
    if (value !== undefined && value !== null && value !== '') properties[name] = value
  }
  return properties as MessageProperties
}

/**
 * One delivery. It remembers the channel it came on: once that channel has closed (the
 * subscription was closed, the channel failed, or the connection was lost and recovered) a
 * settlement is dropped — the broker has already put the message back — and answers `false`.
 */
export class AmqpDelivery implements Delivery {
  readonly body: Uint8Array
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly redelivered: boolean
  readonly #lease: ChannelLease
  readonly #message: ConsumeMessage
  readonly #slot: AckSlot
  #settled = false
  #wireHeaders: Headers | undefined

  constructor(lease: ChannelLease, message: ConsumeMessage) {
    this.#lease = lease
    this.#message = message
    this.#slot = lease.acks.track(message)
    this.body = message.content
    this.headers = writableHeaders((message.properties.headers ?? {}) as Headers)
    this.properties = readProperties(message)
    this.exchange = message.fields.exchange
    this.routingKey = message.fields.routingKey
    this.redelivered = message.fields.redelivered
  }

  /** False once settled, or once the channel it came on has closed (the broker redelivers it). */
  get settleable(): boolean {
    return !this.#settled && this.#lease.open
  }

  /**
   * The headers with every value's wire type kept (`{ '!': 'long', value: 5 }`), decoded from
   * the header table as it arrived, on first use only. Without a kept table (an amqplib the
   * transport does not know), the plain {@link AmqpDelivery.headers}.
   */
  get wireHeaders(): Headers {
    if (this.#wireHeaders === undefined) {
      const properties = this.#message.properties as unknown as { headers?: unknown }
      this.#wireHeaders =
        properties.headers === undefined
          ? this.headers
          : (typedHeaders(properties, properties.headers) ?? this.headers)
    }
    return this.#wireHeaders
  }

  /**
   * Acknowledges it with the channel's next acknowledgement frame, written by the end of this
   * event-loop turn (see {@link ChannelAcks}); `true` once it is held for that frame.
   */
  ack(): boolean {
    return this.#settle('ack')
  }

  nack(requeue: boolean): boolean {
    return this.#settle(requeue === true ? 'requeue' : 'drop')
  }

  #settle(how: 'ack' | 'requeue' | 'drop'): boolean {
    if (this.#settled) return false
    this.#settled = true
    if (!this.#lease.open) return false
    try {
      if (how === 'ack') this.#lease.acks.ack(this.#slot)
      else this.#lease.acks.nack(this.#slot, how === 'requeue')
      return true
    } catch {
      return false
    }
  }
}

/** Writes the acks the lease holds; a channel that closed meanwhile has handed them back. */
function flushQuietly(lease: ChannelLease): void {
  try {
    lease.acks.flush()
  } catch {
    // The broker redelivers what was not acknowledged.
  }
}

type SubscriptionState = 'starting' | 'active' | 'cancelled' | 'closed'

/**
 * A subscription on its own channel of the consumer connection, with per-consumer prefetch. It
 * outlives its channels: after a reconnect the transport re-attaches it, and when the broker
 * cancels the consumer (the queue was deleted) or closes the channel, it re-declares and
 * re-subscribes with backoff until it is closed. Each (re)subscription attempt carries an
 * epoch; an attempt that finds a newer epoch undoes itself, so one subscription never holds
 * two consumers.
 */
export class AmqpSubscription implements TransportSubscription {
  readonly #host: SubscriptionHost
  readonly #queue: string
  readonly #prefetch: number
  readonly #onDelivery: (delivery: Delivery) => void
  readonly #onStatus: ((status: SubscriptionStatus) => void) | undefined
  #state: SubscriptionState = 'starting'
  /** Lost channels whose `channel-lost` has not been told yet (it is told a turn later). */
  readonly #untold = new Set<ChannelLoss>()
  /** A channel was lost since the last subscribe: `consuming` follows the next one. */
  #consumingDue = false
  #lease: ChannelLease | undefined
  #consumerTag: string | undefined
  #epoch = 0
  #attempt = 0
  #timer: NodeJS.Timeout | undefined
  #closing: Promise<void> | undefined

  constructor(
    host: SubscriptionHost,
    queue: string,
    prefetch: number,
    onDelivery: (delivery: Delivery) => void,
    onStatus?: (status: SubscriptionStatus) => void,
  ) {
    this.#host = host
    this.#queue = queue
    this.#prefetch = prefetch
    this.#onDelivery = onDelivery
    this.#onStatus = onStatus
  }

  /** The first subscribe. A failure rejects (and closes the channel); nothing is retried. */
  async start(model: ChannelModel): Promise<void> {
    const epoch = this.#epoch
    try {
      await this.#subscribe(model, epoch, false, true)
    } catch (error) {
      this.#state = 'closed'
      const lease = this.#lease
      if (lease?.open) {
        lease.open = false
        await closeChannelQuietly(lease.channel)
      }
      throw error
    }
    if (this.#state === 'starting') this.#state = 'active'
  }

  /** Subscribes again on a recovered connection; a failure turns into retries with backoff. */
  async reattach(model: ChannelModel): Promise<void> {
    if (this.#state !== 'active') return
    const epoch = this.#newEpoch()
    this.#attempt = 0
    this.#lease = undefined
    this.#consumerTag = undefined
    try {
      await this.#subscribe(model, epoch, false, false)
    } catch (error) {
      if (this.#current(epoch)) {
        this.#host.warn(
          `could not re-subscribe to queue '${this.#queue}' after reconnecting (will retry): ${describeError(error)}`,
        )
        this.#retryLater(epoch, true)
      }
    }
  }

  async cancel(): Promise<void> {
    if (this.#state !== 'active' && this.#state !== 'starting') return
    this.#state = 'cancelled'
    this.#newEpoch()
    const lease = this.#lease
    const tag = this.#consumerTag
    this.#consumerTag = undefined
    if (lease?.open && tag !== undefined) {
      await lease.channel.cancel(tag).then(
        () => undefined,
        () => undefined,
      )
    }
  }

  close(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing
    this.#state = 'closed'
    this.#newEpoch()
    this.#consumerTag = undefined
    this.#host.removed(this)
    const lease = this.#lease
    this.#closing = (async () => {
      if (lease?.open) {
        flushQuietly(lease)
        lease.open = false
        await closeChannelQuietly(lease.channel)
      }
    })()
    return this.#closing
  }

  /** Starts a new epoch: every older attempt and retry timer is void. */
  #newEpoch(): number {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
    this.#epoch += 1
    return this.#epoch
  }

  #current(epoch: number, starting = false): boolean {
    return (
      epoch === this.#epoch &&
      (this.#state === 'active' || (starting && this.#state === 'starting'))
    )
  }

  async #subscribe(
    model: ChannelModel,
    epoch: number,
    redeclare: boolean,
    starting: boolean,
  ): Promise<void> {
    if (redeclare) {
      await this.#host.replayDeclarations(model)
      if (!this.#current(epoch, starting)) return
    }
    let lease = this.#lease
    if (lease === undefined || !lease.open || lease.model !== model) {
      const channel = await model.createChannel()
      lease = this.#adopt(model, channel)
      if (!this.#current(epoch, starting)) {
        lease.open = false
        void closeChannelQuietly(channel)
        return
      }
      this.#lease = lease
    }
    // Per consumer (global = false): RabbitMQ 4 refuses channel-global prefetch.
    await lease.channel.prefetch(this.#prefetch, false)
    if (!this.#current(epoch, starting)) return
    const current = lease
    const { consumerTag } = await current.channel.consume(
      this.#queue,
      (message) => this.#received(current, message),
      { noAck: false },
    )
    if (!this.#current(epoch, starting)) {
      if (current.open) void current.channel.cancel(consumerTag).catch(() => undefined)
      return
    }
    this.#consumerTag = consumerTag
    for (const loss of [...this.#untold]) this.#tellLoss(loss)
    if (this.#consumingDue) {
      this.#consumingDue = false
      this.#tell({ type: 'consuming' })
    }
  }

  /**
   * Tells `channel-lost` once for a lost channel. The error is the channel's own (a channel
   * error, the broker's consumer timeout) or else the connection's, which amqplib reports only
   * after it has closed the connection's channels — hence the turn's wait.
   */
  #tellLoss(loss: ChannelLoss): void {
    if (!this.#untold.delete(loss)) return
    this.#tell({ type: 'channel-lost', error: this.#host.scrub(loss.error()) })
  }

  #tell(status: SubscriptionStatus): void {
    if (this.#onStatus === undefined) return
    try {
      this.#onStatus(status)
    } catch (error) {
      this.#host.warn(
        `the status listener of the consumer on queue '${this.#queue}' ('${status.type}') threw: ${describeError(error)}`,
      )
    }
  }

  #adopt(model: ChannelModel, channel: Channel): ChannelLease {
    const lease: ChannelLease = {
      model,
      channel,
      acks: new ChannelAcks(channel, this.#prefetch),
      open: true,
    }
    let lastError: Error | undefined
    channel.on('error', (error: Error) => {
      lastError = error
    })
    channel.on('handler-error', (error: Error, event: string) => {
      this.#host.warn(
        `a listener for the channel of queue '${this.#queue}' ('${event}' event) threw: ${describeError(error)}`,
      )
    })
    channel.on('close', () => this.#channelClosed(lease, lastError))
    return lease
  }

  #channelClosed(lease: ChannelLease, error: Error | undefined): void {
    lease.open = false
    if (lease !== this.#lease) return
    this.#consumerTag = undefined
    // Our own close() marks the lease closed before closing it, so this is a loss: a channel
    // error, the broker closing the channel, or the connection going.
    if (this.#state === 'active' || this.#state === 'cancelled') {
      const loss: ChannelLoss = { error: () => error ?? this.#host.lossOf(lease.model) }
      this.#untold.add(loss)
      this.#consumingDue = true
      setImmediate(() => this.#tellLoss(loss))
    }
    if (this.#state !== 'active') return
    const epoch = this.#epoch
    // A lost connection closes its channels before it reports itself closed, and recovery
    // re-attaches every subscription then: look again once that has happened, and re-subscribe
    // here only when the channel failed on a connection that is still up.
    setImmediate(() => {
      if (!this.#current(epoch) || this.#host.consumerModel() !== lease.model) return
      // A failed re-subscribe attempt has already scheduled the next one.
      if (this.#timer !== undefined) return
      if (this.#attempt === 0) {
        this.#host.warn(
          `the channel of the consumer on queue '${this.#queue}' was closed${error === undefined ? '' : ` (${describeError(error)})`}: re-subscribing`,
        )
      }
      this.#retryLater(this.#newEpoch(), true)
    })
  }

  #received(lease: ChannelLease, message: ConsumeMessage | null): void {
    if (message === null) {
      // Consumer cancel notification: the queue was deleted (or its leader went away).
      if (lease !== this.#lease) return
      this.#consumerTag = undefined
      if (this.#state !== 'active') return
      this.#host.warn(
        `the broker cancelled the consumer on queue '${this.#queue}' (was the queue deleted?): re-declaring and re-subscribing`,
      )
      this.#retryLater(this.#newEpoch(), true)
      return
    }
    // A closing channel hands its unsettled deliveries back to the broker.
    if (this.#state === 'closed' || !lease.open) return
    const delivery = new AmqpDelivery(lease, message)
    try {
      this.#onDelivery(delivery)
    } catch (error) {
      this.#host.warn(
        `the delivery callback for queue '${this.#queue}' threw, so the message goes back to the queue: ${describeError(error)}`,
      )
      delivery.nack(true)
    }
  }

  #retryLater(epoch: number, redeclare: boolean): void {
    if (!this.#current(epoch)) return
    this.#attempt += 1
    const delay = backoffDelay(this.#host.resubscribeBackoff, this.#attempt)
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.#retry(epoch, redeclare)
    }, delay)
    // The consumer connection's socket keeps the process alive while this matters.
    this.#timer.unref()
  }

  async #retry(epoch: number, redeclare: boolean): Promise<void> {
    if (!this.#current(epoch)) return
    const model = this.#host.consumerModel()
    // No connection: recovery re-attaches every subscription when it is back.
    if (model === undefined) return
    try {
      await this.#subscribe(model, epoch, redeclare, false)
      if (this.#current(epoch)) {
        if (this.#attempt > 1) {
          this.#host.warn(`re-subscribed to queue '${this.#queue}' after ${this.#attempt} attempts`)
        }
        this.#attempt = 0
      }
    } catch (error) {
      if (!this.#current(epoch)) return
      if (this.#attempt === 1) {
        this.#host.warn(
          `could not re-subscribe to queue '${this.#queue}' yet (will keep trying): ${describeError(error)}`,
        )
      }
      this.#retryLater(epoch, redeclare)
    }
  }
}
