import { describe, expect, it, vi } from 'vitest'
import { ChannelAcks } from '../../src/internal/channel-acks.js'
import { delivery, recordingChannel } from '../support/recording-channel.js'

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

  it('gathers the acks of handlers that finished in separate callbacks of one loop iteration into one frame', async () => {
    // A handler awaiting I/O finishes in a callback of its own; the acks of one iteration's
    // callbacks still share a multiple ack, not one frame each. Immediates queued together run
    // in the same check phase, each a callback of its own (microtasks and ticks run between
    // them), and one queued while they run waits for the next iteration: so a flush held to a
    // setImmediate sees all three acks, and one at process.nextTick would write after the first.
    // (Timers cannot show this reliably: each takes its start from a clock read as it is
    // created, so three made in one block fall due in different iterations once a millisecond
    // passes between them, as it did in a CI run under load.)
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const slots = [1, 2, 3].map((tag) => acks.track(delivery(tag)))
    await Promise.all(
      slots.map(
        (slot) =>
          new Promise<void>((resolve) =>
            setImmediate(() => {
              acks.ack(slot)
              resolve()
            }),
          ),
      ),
    )
    await new Promise((resolve) => setImmediate(resolve))
    expect(frames).toEqual(['ack 3+'])
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

  it('lets go of a message once its ack or nack is written, though its slot waits for the next compaction', () => {
    // Up to ~1,000 written slots stay in the order between compactions; were each to keep its
    // delivery (body, properties, headers), a consumer would hold a thousand messages it has
    // finished with through every minor GC, and promote them.
    const { channel } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    acks.track(delivery(1))
    const nacked = acks.track(delivery(2))
    for (let tag = 3; tag <= 500; tag++) {
      acks.ack(acks.track(delivery(tag)))
      if (tag % 50 === 0) acks.flush()
    }
    acks.nack(nacked, false)
    const held = acks.track(delivery(501))
    acks.ack(held)
    expect(acks.tracked).toBe(501)
    // The open delivery and the one whose ack is held, not yet written.
    expect(acks.retained).toBe(2)
    acks.flush()
    expect(acks.retained).toBe(1)
  })

  it('lets go of every message a multiple ack covers', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const open = acks.track(delivery(1))
    for (const tag of [2, 3, 4]) acks.ack(acks.track(delivery(tag)))
    acks.flush()
    expect(acks.retained).toBe(1)
    acks.ack(open)
    acks.track(delivery(5))
    acks.flush()
    expect(frames).toEqual(['ack 2', 'ack 3', 'ack 4', 'ack 1+'])
    expect(acks.retained).toBe(1)
  })

  it.each([
    [1, 1],
    [2, 1],
    [3, 2],
    [100, 50],
    // Unlimited.
    [0, 1_000],
  ])('with prefetch %i, writes the batch when %i acks are held', (prefetch, limit) => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, prefetch)
    for (let tag = 1; tag < limit; tag++) acks.ack(acks.track(delivery(tag)))
    expect(frames).toEqual([])
    acks.ack(acks.track(delivery(limit)))
    expect(frames).toEqual([`ack ${limit}+`])
  })

  it('counts the held acks afresh after every write', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 4)
    for (const tag of [1, 2, 3]) acks.ack(acks.track(delivery(tag)))
    expect(frames).toEqual(['ack 2+'])
    acks.ack(acks.track(delivery(4)))
    expect(frames).toEqual(['ack 2+', 'ack 4+'])
  })

  it('asks for one end-of-turn write however many acks a turn holds, and for another in the next turn', async () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const scheduled = vi.spyOn(globalThis, 'setImmediate')
    try {
      for (const tag of [1, 2, 3]) acks.ack(acks.track(delivery(tag)))
      expect(scheduled).toHaveBeenCalledTimes(1)
      await new Promise((resolve) => setImmediate(resolve))
      expect(frames).toEqual(['ack 3+'])
      scheduled.mockClear()
      for (const tag of [4, 5]) acks.ack(acks.track(delivery(tag)))
      expect(scheduled).toHaveBeenCalledTimes(1)
      await new Promise((resolve) => setImmediate(resolve))
      expect(frames).toEqual(['ack 3+', 'ack 5+'])
    } finally {
      scheduled.mockRestore()
    }
  })

  it('writes a nack alone (never multiple), dropping unless asked to requeue, and keeps what is still open', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const [first, second, third] = [1, 2, 3].map((tag) => acks.track(delivery(tag)))
    acks.nack(second!, false)
    expect(frames).toEqual(['nack 2'])
    expect(acks.tracked).toBe(3)
    acks.nack(first!, true)
    expect(frames).toEqual(['nack 2', 'nack 1 requeue'])
    acks.nack(third!, false)
    expect(frames).toEqual(['nack 2', 'nack 1 requeue', 'nack 3'])
    expect(acks.tracked).toBe(0)
  })

  it('after a nack at the head, the next multiple ack starts behind the deliveries already written', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const [first, second, third, fourth] = [1, 2, 3, 4].map((tag) => acks.track(delivery(tag)))
    acks.ack(second!)
    acks.nack(first!, false)
    // 2's ack was held before the nack: it goes first, singly, behind the open 1.
    expect(frames).toEqual(['ack 2', 'nack 1'])
    acks.ack(fourth!)
    acks.flush()
    expect(frames.at(-1)).toBe('ack 4')
    acks.ack(third!)
    acks.flush()
    expect(frames).toEqual(['ack 2', 'nack 1', 'ack 4', 'ack 3+'])
    expect(acks.tracked).toBe(0)
  })

  it('on a channel closed mid-batch: the end-of-turn write throws nothing and writes nothing, a nack or flush throws', async () => {
    const { channel, frames, close } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const [first, second] = [1, 2].map((tag) => acks.track(delivery(tag)))
    acks.ack(first!)
    close()
    await new Promise((resolve) => setImmediate(resolve))
    expect(frames).toEqual([])
    expect(() => acks.nack(second!, true)).toThrow('Channel closed')
    acks.ack(acks.track(delivery(3)))
    expect(() => acks.flush()).toThrow('Channel closed')
  })

  it('drops the written slots behind an open delivery once the order holds 1,024 of them', () => {
    const { channel } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    acks.track(delivery(1))
    for (let tag = 2; tag <= 1_023; tag++) {
      acks.ack(acks.track(delivery(tag)))
      acks.flush()
    }
    expect(acks.tracked).toBe(1_023)
    acks.ack(acks.track(delivery(1_024)))
    acks.flush()
    expect(acks.tracked).toBe(1)
  })

  it('drops the written run at the head once it is 1,024 long, though few slots follow it', () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 0)
    const slots = Array.from({ length: 1_025 }, (_, i) => acks.track(delivery(i + 1)))
    for (const slot of slots.slice(0, 1_000)) acks.ack(slot)
    expect(frames).toEqual(['ack 1000+'])
    expect(acks.tracked).toBe(1_025)
    for (const slot of slots.slice(1_000, 1_024)) acks.ack(slot)
    acks.flush()
    expect(frames).toEqual(['ack 1000+', 'ack 1024+'])
    expect(acks.tracked).toBe(1)
  })

  it('compacts again only once the order has doubled since the last time', () => {
    const { channel } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    const slots = Array.from({ length: 1_500 }, (_, i) => acks.track(delivery(i + 1)))
    acks.ack(slots[1_499]!)
    acks.flush()
    expect(acks.tracked).toBe(1_499)
    acks.ack(slots[1_498]!)
    acks.flush()
    // 1,499 is below twice the 1,499 left by the last compaction: the written slot stays.
    expect(acks.tracked).toBe(1_499)
  })

  it('does nothing at the end of a turn whose acks were all written already', async () => {
    const { channel, frames } = recordingChannel()
    const acks = new ChannelAcks(channel, 100)
    acks.track(delivery(1))
    acks.ack(acks.track(delivery(2)))
    acks.flush()
    // Deliveries arrive after the write, before the end of the turn: not a reason to compact.
    for (let tag = 3; tag <= 1_100; tag++) acks.track(delivery(tag))
    await new Promise((resolve) => setImmediate(resolve))
    expect(frames).toEqual(['ack 2'])
    expect(acks.tracked).toBe(1_100)
  })
})
