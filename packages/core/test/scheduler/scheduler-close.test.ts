import { describe, expect, it } from 'vitest'
import { AceMq, InMemoryTransport, Topology } from '../../src/index.js'

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('the condition did not hold within 5 s')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('closing with a due message being tried again', () => {
  it('hands it back to the control queue at once: close does not sit out the drain', async () => {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport, { onError: () => undefined })
    const scheduler = mq.scheduler()
    await scheduler.startDelivering()
    await scheduler.in(0, '', 'not-declared-yet', { n: 1 })
    await until(() => scheduler.retrying === 1)
    const started = Date.now()
    await mq.close()
    expect(Date.now() - started).toBeLessThan(1_000)
    expect(scheduler.retrying).toBe(0)
  })

  it('delivers again after close() and a second startDelivering()', async () => {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    try {
      await mq.applyTopology(Topology.define().queue('again'))
      const scheduler = mq.scheduler()
      await scheduler.startDelivering()
      await scheduler.close()
      await scheduler.startDelivering()
      await scheduler.in(0, '', 'again', 'x')
      await until(() => transport.messageCount('again') === 1)
      expect(scheduler.delivered).toBe(1)
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
  })
})
