import { afterEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  Topology,
} from '../../src/index.js'
import { type ClaimingIdempotencyStore } from '../../src/spi.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function eventually(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`)
    await sleep(10)
  }
}

/** A store whose confirm always fails, as one whose database went away after the claim. */
function failingConfirms(inner: ClaimingIdempotencyStore): {
  store: ClaimingIdempotencyStore
  confirms: number[]
} {
  const confirms: number[] = []
  return {
    confirms,
    store: {
      tryClaim: (id) => inner.tryClaim(id),
      claim: (id) => inner.claim(id),
      confirm: async () => {
        confirms.push(Date.now())
        throw new Error('the database went away while confirming')
      },
      release: (id) => inner.release(id),
      isConfirmed: (id) => inner.isConfirmed(id),
    },
  }
}

describe('a confirm that keeps failing', () => {
  let mq: AceMq | undefined
  afterEach(async () => {
    await mq?.close({ drainTimeout: 0 })
  })

  it('is tried four times over ~2.6 s, then the message is acked all the same and the failure reported once', async () => {
    const transport = new InMemoryTransport()
    const reported: [unknown, string][] = []
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([error, context]),
    })
    await mq.applyTopology(Topology.define().queueWithDeadLetter('confirms'))
    const { store, confirms } = failingConfirms(new InMemoryIdempotencyStore())
    let calls = 0
    await mq.consume('confirms', ConsumerOptions.defaults().idempotent(store), () => {
      calls++
    })
    await mq.publisher('', 'confirms').send({}, { id: 'order-1' })

    await eventually(() => reported.length > 0, 10_000)
    await eventually(() => mq?.inFlight === 0, 1_000)
    expect(calls).toBe(1)
    expect(confirms).toHaveLength(4)
    const waits = confirms.slice(1).map((at, i) => at - (confirms[i] as number))
    expect(waits[0]).toBeGreaterThanOrEqual(90)
    expect(waits[1]).toBeGreaterThanOrEqual(490)
    expect(waits[2]).toBeGreaterThanOrEqual(1_990)
    expect(reported).toHaveLength(1)
    expect(reported[0]?.[1]).toBe('could not confirm message order-1')
    expect(String(reported[0]?.[0])).toMatch(/went away while confirming/)
    // Acked: not on the queue, not dead-lettered, not parked, not redelivered.
    await sleep(100)
    expect(transport.messageCount('confirms')).toBe(0)
    expect(transport.messageCount('confirms.dlq')).toBe(0)
    expect(calls).toBe(1)
  })

  it('is waited for by a close, as part of the drain: the work is done, the confirm keeps it from being done again', async () => {
    const transport = new InMemoryTransport()
    const reported: string[] = []
    mq = await AceMq.connect(transport, { onError: (_error, context) => reported.push(context) })
    await mq.applyTopology(Topology.define().queueWithDeadLetter('confirms'))
    const { store, confirms } = failingConfirms(new InMemoryIdempotencyStore())
    await mq.consume('confirms', ConsumerOptions.defaults().idempotent(store), () => undefined)
    await mq.publisher('', 'confirms').send({}, { id: 'order-2' })
    await eventually(() => confirms.length === 2, 5_000)

    await mq.close({ drainTimeout: '5s' })
    expect(confirms).toHaveLength(4)
    expect(reported).toEqual(['could not confirm message order-2'])
    expect(transport.messageCount('confirms')).toBe(0)
  })
})
