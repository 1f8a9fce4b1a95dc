import type { Channel, ConsumeMessage } from 'amqplib'
import { describe, expect, it } from 'vitest'
import { ChannelAcks } from '../../src/internal/channel-acks.js'

/** The frames a channel was asked to write, as `ack <tag>`, `ack <tag>+` (multiple), `nack <tag>`. */
function recordingChannel(): { channel: Channel; frames: string[] } {
  const frames: string[] = []
  const channel = {
    ack: (message: ConsumeMessage, multiple?: boolean) =>
      frames.push(`ack ${message.fields.deliveryTag}${multiple === true ? '+' : ''}`),
    nack: (message: ConsumeMessage, _multiple?: boolean, requeue?: boolean) =>
      frames.push(`nack ${message.fields.deliveryTag}${requeue === true ? ' requeue' : ''}`),
  }
  return { channel: channel as unknown as Channel, frames }
}

function delivery(tag: number): ConsumeMessage {
  return { fields: { deliveryTag: tag } } as unknown as ConsumeMessage
}

describe('ChannelAcks', () => {
  it('acknowledges a settled run with one multiple ack on its last held delivery, at the end of the turn', async () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const slots = [1, 2, 3, 4].map((tag) => acks.track(delivery(tag)))
    for (const slot of slots) acks.ack(slot)
    expect(frames).toEqual([])
    await new Promise((resolve) => setImmediate(resolve))
    expect(frames).toEqual(['ack 4+'])
    expect(acks.tracked).toBe(0)
  })

  it('writes the batch at once when half the window is held', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 4)
    const slots = [1, 2, 3].map((tag) => acks.track(delivery(tag)))
    acks.ack(slots[0]!)
    expect(frames).toEqual([])
    acks.ack(slots[1]!)
    expect(frames).toEqual(['ack 2+'])
  })

  it('never covers an open delivery: the acks behind it go singly, and the run from it later', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const [first, second, third, fourth] = [1, 2, 3, 4].map((tag) => acks.track(delivery(tag)))
    acks.ack(second!)
    acks.ack(fourth!)
    acks.flush()
    expect(frames).toEqual(['ack 2', 'ack 4'])
    acks.ack(first!)
    acks.flush()
    // 2 and 4 are written already: the multiple ack goes on 1, the last one held up to 3.
    expect(frames).toEqual(['ack 2', 'ack 4', 'ack 1+'])
    acks.ack(third!)
    acks.flush()
    expect(frames.at(-1)).toBe('ack 3+')
    expect(acks.tracked).toBe(0)
  })

  it('writes the acks held before a nack first, then the nack', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const [first, second, third] = [1, 2, 3].map((tag) => acks.track(delivery(tag)))
    acks.ack(first!)
    acks.nack(third!, true)
    expect(frames).toEqual(['ack 1+', 'nack 3 requeue'])
    acks.ack(second!)
    acks.flush()
    expect(frames.at(-1)).toBe('ack 2+')
  })

  it('keeps a bounded order behind a delivery that stays open while 100,000 others are acked', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    acks.track(delivery(1))
    for (let tag = 2; tag <= 100_001; tag++) {
      acks.ack(acks.track(delivery(tag)))
      if (tag % 50 === 0) acks.flush()
    }
    acks.flush()
    expect(frames).toHaveLength(100_000)
    expect(frames.every((frame) => !frame.endsWith('+'))).toBe(true)
    expect(acks.tracked).toBeLessThanOrEqual(2_048)
  })
})
