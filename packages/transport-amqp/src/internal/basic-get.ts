import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib'
import type { Delivery } from '@acemq/core/spi'
import { closeChannelQuietly } from './amqp-helpers.js'
import { ChannelAcks } from './channel-acks.js'
import { AmqpDelivery } from './subscription.js'

/** The channel gets are taken on, and whether it can still carry their acks. */
interface GetLease {
  readonly model: ChannelModel
  readonly channel: Channel
  /** A get is taken on demand: its ack is written at once (a window of 1 holds nothing back). */
  readonly acks: ChannelAcks
  open: boolean
}

/**
 * `basic.get` with manual acks on one channel of the consumer connection, opened on first use
 * and again after it closes (a get from a missing queue closes it with 404). Deliveries taken
 * on a channel that has since closed answer `false` to `ack`/`nack`: the broker has put them
 * back already.
 */
export class BasicGetter {
  readonly #model: () => ChannelModel
  #lease: Promise<GetLease> | undefined

  constructor(model: () => ChannelModel) {
    this.#model = model
  }

  /** The head of `queue`, unacknowledged, or undefined when it is empty. */
  async get(queue: string): Promise<Delivery | undefined> {
    const lease = await this.#open()
    const message = await lease.channel.get(queue, { noAck: false })
    if (message === false) return undefined
    // A get's fields carry a message count instead of a consumer tag; the delivery reads neither.
    return new AmqpDelivery(lease, message as unknown as ConsumeMessage)
  }

  /** Ready messages in `queue` (a passive declare on a short-lived channel). */
  async queueLength(queue: string): Promise<number> {
    const channel = await this.#model().createChannel()
    channel.on('error', () => undefined)
    try {
      return (await channel.checkQueue(queue)).messageCount
    } finally {
      void closeChannelQuietly(channel)
    }
  }

  /** Closes the get channel: every delivery not yet settled goes back to its queue. */
  async close(): Promise<void> {
    const lease = this.#lease
    this.#lease = undefined
    if (lease === undefined) return
    const opened = await lease.catch(() => undefined)
    if (opened === undefined) return
    opened.open = false
    await closeChannelQuietly(opened.channel)
  }

  #open(): Promise<GetLease> {
    const model = this.#model()
    const current = this.#lease
    if (current !== undefined) {
      return current.then(
        (lease) => (lease.open && lease.model === model ? lease : this.#reopen(model)),
        () => this.#reopen(model),
      )
    }
    return this.#reopen(model)
  }

  #reopen(model: ChannelModel): Promise<GetLease> {
    const opening = (async (): Promise<GetLease> => {
      const channel = await model.createChannel()
      const lease: GetLease = { model, channel, acks: new ChannelAcks(channel, 1), open: true }
      channel.on('error', () => undefined)
      channel.on('close', () => {
        lease.open = false
      })
      return lease
    })()
    this.#lease = opening
    return opening
  }
}
