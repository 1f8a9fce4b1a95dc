import { afterEach, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '../../src/index.js'
import { RecordingTransport } from '@acemq/testing'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function eventually(
  condition: () => boolean,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await sleep(5)
  }
}

describe('deliveries and the channel they came on (in memory)', () => {
  let mq: AceMq | undefined
  afterEach(async () => {
    await mq?.close({ drainTimeout: 0 })
    mq = undefined
  })

  async function open(
    queue: string,
  ): Promise<{ memory: InMemoryTransport; transport: RecordingTransport; mq: AceMq }> {
    const memory = new InMemoryTransport()
    const transport = new RecordingTransport(memory)
    mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    return { memory, transport, mq }
  }

  it('keeps handling held deliveries of a live channel when only the publishing connection drops', async () => {
    const { memory, transport, mq } = await open('publish-drop')
    const runs = new Map<string, number>()
    await mq.consume('publish-drop', ConsumerOptions.defaults(), (message) => {
      runs.set(message.envelope.id, (runs.get(message.envelope.id) ?? 0) + 1)
    })
    mq.pauseConsuming()
    for (const id of ['a', 'b', 'c']) await mq.publisher('', 'publish-drop').send({}, { id })
    await eventually(() => mq.held === 3)
    await memory.simulateConnectionLoss(20, 'publish')
    mq.resumeConsuming()
    await eventually(() => runs.size === 3, 2_000, 'every held message handled')
    expect([...runs.values()]).toEqual([1, 1, 1])
    for (const id of ['a', 'b', 'c']) {
      expect(transport.settlementsOf(id)).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
    }
    expect(mq.held).toBe(0)
    expect((await mq.health()).status).toBe('UP')
  })

  it('never runs a delivery buffered from a channel that closed: each message is handled once after its redelivery', async () => {
    const { memory, mq } = await open('channel-closed')
    const runs = new Map<string, number>()
    let release!: () => void
    const blocked = new Promise<void>((resolve) => (release = resolve))
    await mq.consume(
      'channel-closed',
      ConsumerOptions.defaults().withPrefetch(5),
      async (message) => {
        const id = message.envelope.id
        runs.set(id, (runs.get(id) ?? 0) + 1)
        if (id === 'm0' && runs.get(id) === 1) await blocked
      },
    )
    for (let i = 0; i < 5; i++) await mq.publisher('', 'channel-closed').send({}, { id: `m${i}` })
    await eventually(() => mq.inFlight === 1 && memory.messageCount('channel-closed') === 0)
    // As RabbitMQ's consumer_timeout would: the channel closes under the running handler.
    memory.closeChannel('channel-closed', 'delivery acknowledgement timed out')
    release()
    await eventually(() => [0, 1, 2, 3, 4].every((i) => runs.has(`m${i}`)), 3_000, 'every message')
    await eventually(() => mq.inFlight === 0 && memory.messageCount('channel-closed') === 0)
    await sleep(50)
    // m0 ran when its channel died (its ack was lost), so it runs again; the others never
    // ran from the dead channel.
    expect(Object.fromEntries(runs)).toEqual({ m0: 2, m1: 1, m2: 1, m3: 1, m4: 1 })
  })

  it('hands held deliveries back and lets go of its subscription during a long pause, then takes them again on resume', async () => {
    const { memory, mq } = await open('long-pause')
    const runs: string[] = []
    await mq.consume(
      'long-pause',
      ConsumerOptions.defaults().withHeldTimeout('200ms'),
      (message) => {
        runs.push(message.envelope.id)
      },
    )
    mq.pauseConsuming()
    for (const id of ['x', 'y', 'z']) await mq.publisher('', 'long-pause').send({}, { id })
    await eventually(() => mq.held === 3)
    await eventually(() => mq.held === 0, 2_000, 'the held deliveries handed back')
    await sleep(100)
    // Back on the queue, and no consumer is taking them while paused.
    expect(memory.messageCount('long-pause')).toBe(3)
    expect(runs).toEqual([])
    mq.resumeConsuming()
    await eventually(() => runs.length === 3, 2_000, 'handled after the resume')
    expect(runs.sort()).toEqual(['x', 'y', 'z'])
  })
})
