import type { Channel, ChannelModel } from 'amqplib'
import { describe, expect, it } from 'vitest'
import { ChannelAcks } from '../../src/internal/channel-acks.js'
import { AmqpDelivery } from '../../src/internal/subscription.js'
import { delivery as message, recordingChannel } from '../support/recording-channel.js'

/** A channel's lease as a subscription holds it, on a fake channel. */
function fakeLease(prefetch = 100): {
  lease: { model: ChannelModel; channel: Channel; acks: ChannelAcks; open: boolean }
  frames: string[]
  closeChannel(): void
} {
  const { channel, frames, close } = recordingChannel()
  const lease = {
    model: {} as ChannelModel,
    channel,
    acks: new ChannelAcks(channel, prefetch),
    open: true,
  }
  return { lease, frames, closeChannel: close }
}

describe('AmqpDelivery', () => {
  it('holds its ack for the channel’s next ack frame, and is settleable no more', () => {
    const { lease, frames } = fakeLease()
    const delivery = new AmqpDelivery(lease, message(1))
    expect(delivery.settleable).toBe(true)
    expect(delivery.ack()).toBe(true)
    expect(delivery.settleable).toBe(false)
    expect(frames).toEqual([])
    lease.acks.flush()
    expect(frames).toEqual(['ack 1+'])
  })

  it('settles once: a second ack or nack writes nothing and answers false', () => {
    const { lease, frames } = fakeLease()
    const acked = new AmqpDelivery(lease, message(1))
    const nacked = new AmqpDelivery(lease, message(2))
    expect(acked.ack()).toBe(true)
    expect(acked.ack()).toBe(false)
    expect(acked.nack(true)).toBe(false)
    expect(nacked.nack(false)).toBe(true)
    expect(nacked.nack(false)).toBe(false)
    expect(nacked.ack()).toBe(false)
    lease.acks.flush()
    expect(frames).toEqual(['ack 1+', 'nack 2'])
  })

  it('writes a nack at once, requeueing only when asked to', () => {
    const { lease, frames } = fakeLease()
    const [first, second] = [1, 2].map((tag) => new AmqpDelivery(lease, message(tag)))
    expect(first!.nack(true)).toBe(true)
    expect(frames).toEqual(['nack 1 requeue'])
    expect(second!.nack(false)).toBe(true)
    expect(frames).toEqual(['nack 1 requeue', 'nack 2'])
    expect(first!.settleable).toBe(false)
    expect(second!.settleable).toBe(false)
  })

  it('once its channel has closed, is not settleable, writes nothing and answers false, for good', () => {
    const { lease, frames } = fakeLease()
    const [acked, nacked] = [1, 2].map((tag) => new AmqpDelivery(lease, message(tag)))
    lease.open = false
    expect(acked!.settleable).toBe(false)
    expect(acked!.ack()).toBe(false)
    expect(nacked!.nack(true)).toBe(false)
    // Settled (dropped) all the same: the lease coming back would not make it settle twice.
    lease.open = true
    expect(acked!.settleable).toBe(false)
    expect(acked!.ack()).toBe(false)
    expect(nacked!.nack(true)).toBe(false)
    lease.acks.flush()
    expect(frames).toEqual([])
  })

  it('answers false when the channel throws as its frame is written (closed under it)', () => {
    const { lease, frames, closeChannel } = fakeLease(1)
    const [acked, nacked] = [1, 2].map((tag) => new AmqpDelivery(lease, message(tag)))
    closeChannel()
    // Prefetch 1: the ack is written at once, and the channel refuses it.
    expect(acked!.ack()).toBe(false)
    expect(nacked!.nack(false)).toBe(false)
    expect(nacked!.settleable).toBe(false)
    expect(frames).toEqual([])
  })
})
