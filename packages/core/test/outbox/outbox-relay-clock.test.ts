import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { AceMq, InMemoryOutboxStore, OutboxRecord, Topology } from '../../src/index.js'
import { outboxStoreReplacing } from '@acemq/testing'
import { START, closeOnFakeClock, run, settled } from '../consumer/fake-clock.js'
import { HoldingTransport, sentTwice } from './relay-doubles.js'

// The relay's waits on a fake clock: a mark tried again with its back-off, and the leases kept
// while publishes are held. The real-time tests of outbox-relay-faults.test.ts and the outbox
// scenarios pin the same over seconds; these say at which instant each thing happens.

describe('the outbox relay on a fake clock', () => {
  let transport: HoldingTransport
  let mq: AceMq
  let reports: { error: unknown; context: string }[]
  let inner: InMemoryOutboxStore

  beforeEach(async () => {
    // The consumer tests' fake clock, with the lease keeper's intervals faked too.
    vi.useFakeTimers({
      now: START,
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    })
    reports = []
    transport = new HoldingTransport()
    mq = await AceMq.connect(transport, {
      origin: 'orders@test',
      onError: (error, context) => reports.push({ error, context }),
    })
    await mq.applyTopology(Topology.define().queue('orders.placed'))
    inner = new InMemoryOutboxStore()
    for (let i = 0; i < 30; i++) {
      await inner.add(OutboxRecord.of('', 'orders.placed', { i }, { id: `o-${i}` }))
    }
  })

  afterEach(async () => {
    transport.releaseHeld()
    await closeOnFakeClock(mq)
  })

  it('tries a failed mark again after 0.1, 0.2, 0.4 and 0.8 s, saying so each time, and counts the batch once it lands', async () => {
    const tries: number[] = []
    let failures = 4
    const store = outboxStoreReplacing(inner, {
      markPublished: async (ids) => {
        tries.push(Date.now() - START)
        if (failures-- > 0) throw new Error(`deadlock ${tries.length}`)
        await inner.markPublished(ids)
      },
    })
    const relay = mq.outbox(store, { batch: 50 })
    const draining = relay.drainOnce()
    await run(1_499)
    expect(await settled(draining)).toBe(false)
    expect(tries).toEqual([0, 100, 300, 700])
    expect(relay.published).toBe(0)
    await run(1)
    expect(await draining).toBe(30)
    expect(tries).toEqual([0, 100, 300, 700, 1_500])
    expect(relay.published).toBe(30)
    expect(await inner.pendingCount()).toBe(0)
    expect(reports.map((r) => [(r.error as Error).message, r.context])).toEqual(
      [1, 2, 3, 4].map((n) => [
        `deadlock ${n}`,
        `the outbox relay could not mark 30 published records (try ${n} of 5); it tries again`,
      ]),
    )
  })

  it('gives a mark up after 5 tries, yet marks the batch published meanwhile: only the failed batch goes out again', async () => {
    const store = outboxStoreReplacing(inner, {
      markPublished: async (ids) => {
        if ([ids].flat().includes('o-0')) throw new Error('deadlock detected')
        await inner.markPublished(ids)
      },
    })
    const relay = mq.outbox(store, { batch: 10 })
    const draining = relay.drainOnce().then(
      () => undefined,
      (error: unknown) => error,
    )
    await run(1_499)
    expect(await settled(draining)).toBe(false)
    await run(1)
    expect(await draining).toMatchObject({ message: 'deadlock detected' })
    expect(reports).toHaveLength(4)
    // The first batch's mark failed; the second, published meanwhile, was marked; the third
    // was never claimed.
    expect(await inner.pendingCount()).toBe(20)
    expect(relay.published).toBe(10)
    expect(transport.messageCount('orders.placed')).toBe(20)
    await run(30_000)
    const second = mq.outbox(inner, { batch: 10, name: 'outbox:second' }).drainOnce()
    await run(0)
    expect(await second).toBe(20)
    expect(sentTwice(transport, 'orders.placed')).toEqual(
      Array.from({ length: 10 }, (_, i) => `o-${i}`).sort(),
    )
  })

  it('keeps the leases of held publishes, a batch claimed ahead’s too, and stops once the round is done', async () => {
    const renewed: { ids: readonly string[]; at: number }[] = []
    const store = outboxStoreReplacing(inner, {
      renew: (ids, lease, leaseMs) => {
        renewed.push({ ids: [...ids], at: Date.now() - START })
        return inner.renew(ids, lease, leaseMs)
      },
    })
    transport.holding = true
    const relay = mq.outbox(store, { batch: 15, lease: 300 })
    const draining = relay.drainOnce()
    await run(900)
    // Both batches renewed every 100 ms: the one held, and the one claimed ahead.
    expect(renewed.filter((r) => r.ids.includes('o-0')).map((r) => r.at)).toEqual(
      Array.from({ length: 9 }, (_, i) => 100 * (i + 1)),
    )
    expect(renewed.filter((r) => r.ids.includes('o-15'))).toHaveLength(9)
    const second = mq.outbox(inner, { batch: 50, lease: 300, name: 'outbox:b' })
    expect(await second.drainOnce()).toBe(0)
    transport.releaseHeld()
    await run(0)
    expect(await draining).toBe(30)
    const count = renewed.length
    await run(1_000)
    expect(renewed).toHaveLength(count)
    expect(transport.messageCount('orders.placed')).toBe(30)
    expect(reports).toEqual([])
  })

  it('tells onError when a renewal finds a lease lapsed', async () => {
    const store = outboxStoreReplacing(inner, { renew: async () => 0 })
    transport.holding = true
    const draining = mq.outbox(store, { batch: 50, lease: 300 }).drainOnce()
    await run(100)
    expect(reports.map((r) => r.context)).toEqual([
      'the outbox relay lost the lease on records it was publishing',
    ])
    transport.releaseHeld()
    await run(0)
    expect(await draining).toBe(30)
  })
})
