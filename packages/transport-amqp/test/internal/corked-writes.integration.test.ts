import { afterEach, describe, expect, it } from 'vitest'
import amqplib, { type ChannelModel } from 'amqplib'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { writeEachPassAtOnce } from '../../src/internal/corked-writes.js'

const hasRabbit = await requireRabbit()

/** The socket under an amqplib connection, its writes counted. */
function countWrites(model: ChannelModel): { single: number; vectored: number; chunks: number } {
  const socket = (model.connection as unknown as { stream: Record<string, unknown> }).stream
  const counts = { single: 0, vectored: 0, chunks: 0 }
  const write = socket['_write'] as (...args: unknown[]) => void
  const writev = socket['_writev'] as (chunks: unknown[], ...rest: unknown[]) => void
  socket['_write'] = function (this: unknown, ...args: unknown[]) {
    counts.single++
    counts.chunks++
    return write.apply(this, args)
  }
  socket['_writev'] = function (this: unknown, chunks: unknown[], ...rest: unknown[]) {
    counts.vectored++
    counts.chunks += chunks.length
    return writev.call(this, chunks, ...rest)
  }
  return counts
}

describe.runIf(hasRabbit)('publishes written a pass at a time (corked socket)', () => {
  let model: ChannelModel | undefined

  afterEach(async () => {
    await model?.close()
    model = undefined
  })

  it('writes a turn of publishes in one socket write, every one confirmed and delivered in order', async () => {
    model = await amqplib.connect(AMQP_URL, { noDelay: true })
    expect(writeEachPassAtOnce(model)).toBe(true)
    // Wrapped once per connection: a second call finds it wrapped and changes nothing.
    expect(writeEachPassAtOnce(model)).toBe(false)
    const channel = await model.createConfirmChannel()
    const queue = uniqueName('corked.writes')
    await channel.assertQueue(queue, { exclusive: true })
    const counts = countWrites(model)
    const confirms = Array.from(
      { length: 50 },
      (_, i) =>
        new Promise<void>((resolve, reject) => {
          channel.publish('', queue, Buffer.from(`m${i}`), { mandatory: true }, (error) =>
            error === null || error === undefined ? resolve() : reject(error as Error),
          )
        }),
    )
    await Promise.all(confirms)
    // 50 publishes from one turn: amqplib queued 50 chunks, the socket saw them in one writev.
    expect(counts.chunks).toBe(50)
    expect(counts.vectored).toBe(1)
    expect(counts.single).toBe(0)
    const received: string[] = []
    for (;;) {
      const message = await channel.get(queue, { noAck: true })
      if (message === false) break
      received.push(message.content.toString())
    }
    expect(received).toEqual(Array.from({ length: 50 }, (_, i) => `m${i}`))
  })

  it('without it, the same publishes are as many socket writes (what the wrapper saves)', async () => {
    model = await amqplib.connect(AMQP_URL, { noDelay: true })
    const channel = await model.createConfirmChannel()
    const queue = uniqueName('uncorked.writes')
    await channel.assertQueue(queue, { exclusive: true })
    const counts = countWrites(model)
    for (let i = 0; i < 50; i++) channel.publish('', queue, Buffer.from(`m${i}`))
    await channel.waitForConfirms()
    expect(counts.chunks).toBe(50)
    expect(counts.single).toBeGreaterThan(1)
  })

  it('changes nothing on a connection without the internals it knows', () => {
    const unknown = { connection: { stream: {}, muxer: {} } } as unknown as ChannelModel
    expect(writeEachPassAtOnce(unknown)).toBe(false)
  })
})
