import { describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  InMemoryTransport,
  Topology,
  type Consumer,
} from '../../src/index.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** What `promise` came to within `ms`: its value, or 'still waiting'. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  return Promise.race([promise, sleep(ms).then(() => 'still waiting' as const)])
}

describe('a consumer closed from inside two of its own handlers', () => {
  // Simulation schedule (seed -1540268967): the second close from inside answered the first
  // close's promise without counting its caller as waiting inside, so the first close waited
  // for the second caller's handler (35 days), and that handler waited for the first close.
  it('answers both closes without either waiting for the other, and acks both messages', async () => {
    const memory = new InMemoryTransport()
    const mq = await AceMq.connect(memory)
    try {
      await mq.applyTopology(Topology.define().queue('closed-twice'))
      let started = 0
      let bothStarted: () => void = () => undefined
      const barrier = new Promise<void>((resolve) => (bothStarted = resolve))
      const closes: Promise<void>[] = []
      const runs = new Map<string, number>()
      const consumer: Consumer = await mq.consume(
        'closed-twice',
        ConsumerOptions.defaults().withPrefetch(2).withConcurrency(2),
        async (message) => {
          runs.set(message.envelope.id, (runs.get(message.envelope.id) ?? 0) + 1)
          if (++started === 2) bothStarted()
          await barrier
          // The first asks for a drain of 35 days, the second for none: the first close's
          // drain must not wait for the second caller, which waits for that same close.
          const close = consumer.close({
            drainTimeout: closes.length === 0 ? 3_000_000_000 : 0,
          })
          closes.push(close)
          await close
        },
      )
      const publisher = mq.publisher('', 'closed-twice')
      await publisher.send({ n: 1 }, { id: 'first' })
      await publisher.send({ n: 2 }, { id: 'second' })
      await barrier
      await sleep(10)
      expect(closes).toHaveLength(2)
      expect(await within(Promise.all(closes), 2_000)).not.toBe('still waiting')
      // Both handlers returned: their acks are written and the channel closed after them.
      const deadline = Date.now() + 2_000
      while (consumer.inFlight > 0 && Date.now() < deadline) await sleep(5)
      expect(consumer.inFlight).toBe(0)
      expect(await memory.queueLength('closed-twice')).toBe(0)
      expect(Object.fromEntries(runs)).toEqual({ first: 1, second: 1 })
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
  })
})
