import { describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, InMemoryTransport, RetryPolicy, Topology } from '../src/index.js'

describe('consuming a queue that does not exist', () => {
  it('is refused with the queue named, and declares nothing for it: no .dlq, .parked or rung is left', async () => {
    const transport = new InMemoryTransport()
    await using mq = await AceMq.connect(transport)
    const policy = RetryPolicy.exponential(3, '1m') // waits of 1 and 2 minutes: broker rungs
    await expect(
      mq.consume('orderz.placed', ConsumerOptions.defaults().withRetry(policy), () => undefined),
    ).rejects.toThrow(/'orderz\.placed'/)
    for (const queue of [
      'orderz.placed.dlq',
      'orderz.placed.parked',
      'orderz.placed.retry.1m',
      'orderz.placed.retry.2m',
    ]) {
      await expect(transport.queueLength(queue), queue).rejects.toThrow()
    }

    // The connection is fine: the right name consumes.
    await mq.applyTopology(Topology.define().queueWithRetry('orders.placed', policy))
    await mq.consume('orders.placed', ConsumerOptions.defaults().withRetry(policy), () => undefined)
    expect(await transport.queueLength('orders.placed.dlq')).toBe(0)
  })
})
