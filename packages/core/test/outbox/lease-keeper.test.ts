import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { InMemoryOutboxStore, OutboxRecord, type OutboxStore } from '../../src/index.js'
import { LeaseKeeper } from '../../src/outbox/lease-keeper.js'
import type { StoredOutboxRecord } from '../../src/spi.js'
import { outboxStoreReplacing } from '@acemq/testing'

// The lease keeper on a fake clock: when it renews, what it renews, what it reports, and when
// it stops (the relay's real-time lease test, issue 27 item 7, pins the same over a second).

const LEASE = 300

interface Renewal {
  readonly ids: readonly string[]
  readonly lease: string
  readonly leaseMs: number
  readonly at: number
}

describe('the lease keeper', () => {
  let inner: InMemoryOutboxStore
  let renewals: Renewal[]
  let reports: { error: unknown; context: string }[]
  let answer: (ids: readonly string[], lease: string, leaseMs: number) => Promise<number>

  beforeEach(() => {
    vi.useFakeTimers({
      now: Date.UTC(2030, 0, 1),
      toFake: ['setInterval', 'clearInterval', 'Date'],
    })
    inner = new InMemoryOutboxStore()
    renewals = []
    reports = []
    answer = (ids, lease, leaseMs) => inner.renew(ids, lease, leaseMs)
  })

  afterEach(() => {
    vi.useRealTimers()
  })

  function storeRenewing(): OutboxStore {
    return outboxStoreReplacing(inner, {
      renew: (ids, lease, leaseMs) => {
        const list = [ids].flat()
        renewals.push({ ids: list, lease, leaseMs, at: Date.now() })
        return answer(list, lease, leaseMs)
      },
    })
  }

  function keeper(store: OutboxStore, leaseMs = LEASE): LeaseKeeper {
    return new LeaseKeeper(store, leaseMs, (error, context) => reports.push({ error, context }))
  }

  async function claimed(count: number): Promise<readonly StoredOutboxRecord[]> {
    for (let i = 0; i < count; i++) {
      await inner.add(OutboxRecord.of('', 'orders.placed', { i }, { id: `o-${i}` }))
    }
    return inner.claimBatch(count, LEASE)
  }

  const started = Date.UTC(2030, 0, 1)

  it('renews the batch’s ids under its lease token every third of the lease, until stopped', async () => {
    const records = await claimed(3)
    const kept = keeper(storeRenewing()).keep(records)
    expect(kept.records).toBe(records)
    await vi.advanceTimersByTimeAsync(99)
    expect(renewals).toEqual([])
    await vi.advanceTimersByTimeAsync(1)
    expect(renewals).toEqual([
      { ids: ['o-0', 'o-1', 'o-2'], lease: records[0]?.lease, leaseMs: LEASE, at: started + 100 },
    ])
    await vi.advanceTimersByTimeAsync(200)
    expect(renewals.map((r) => r.at - started)).toEqual([100, 200, 300])
    // Renewed in time: a second claim, one lease after the first, finds nothing to take.
    expect(await inner.claimBatch(10, LEASE)).toEqual([])
    kept.stop()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(renewals).toHaveLength(3)
    expect(reports).toEqual([])
  })

  it('renews a lease of 1 or 2 ms every millisecond, never at a 0 ms interval', async () => {
    const records = await claimed(1)
    const kept = keeper(storeRenewing(), 2).keep(records)
    await vi.advanceTimersByTimeAsync(3)
    expect(renewals.map((r) => r.at - started)).toEqual([1, 2, 3])
    kept.stop()
  })

  it('does not renew a batch without a lease token, or with a store that cannot renew', async () => {
    const records = await claimed(2)
    const untokened = records.map(({ lease: _lease, ...rest }) => rest as StoredOutboxRecord)
    const noToken = keeper(storeRenewing()).keep(untokened)
    const { renew: _renew, ...cannotRenew } = storeRenewing()
    const noRenew = keeper(cannotRenew as OutboxStore).keep(records)
    expect(noRenew.records).toBe(records)
    await vi.advanceTimersByTimeAsync(1_000)
    expect(renewals).toEqual([])
    expect(vi.getTimerCount()).toBe(0)
    noToken.stop()
    noRenew.stop()
    // An empty batch has no token either.
    expect(keeper(storeRenewing()).keep([]).records).toEqual([])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('reports the records whose lease lapsed, once, with how many of the batch', async () => {
    const records = await claimed(4)
    answer = async () => 3
    const kept = keeper(storeRenewing()).keep(records)
    await vi.advanceTimersByTimeAsync(100)
    expect(reports).toHaveLength(1)
    expect(reports[0]?.context).toBe('the outbox relay lost the lease on records it was publishing')
    expect((reports[0]?.error as Error).message).toBe(
      "the lease on 1 of 4 outbox records lapsed before their publish finished: another relay may publish them too (the consumer's idempotency store catches the copy); a longer lease avoids it",
    )
    // Still 3 held: nothing more to say.
    await vi.advanceTimersByTimeAsync(100)
    expect(reports).toHaveLength(1)
    // One more lost: said again, counting from the 3 still held.
    answer = async () => 1
    await vi.advanceTimersByTimeAsync(100)
    expect(reports).toHaveLength(2)
    expect((reports[1]?.error as Error).message).toMatch(/^the lease on 2 of 4 outbox records/)
    // A renewal answering more than are held does not raise the count back.
    answer = async () => 4
    await vi.advanceTimersByTimeAsync(100)
    answer = async () => 1
    await vi.advanceTimersByTimeAsync(100)
    expect(reports).toHaveLength(2)
    kept.stop()
  })

  it('says nothing of a lapse a renewal finds after the batch was stopped', async () => {
    const records = await claimed(2)
    let finish: (still: number) => void = () => undefined
    answer = () => new Promise<number>((resolve) => (finish = resolve))
    const kept = keeper(storeRenewing()).keep(records)
    await vi.advanceTimersByTimeAsync(100)
    expect(renewals).toHaveLength(1)
    kept.stop()
    finish(0)
    await vi.advanceTimersByTimeAsync(0)
    expect(reports).toEqual([])
  })

  it('reports a failed renewal and tries again at the next interval', async () => {
    const records = await claimed(2)
    const failure = new Error('connection terminated')
    answer = async () => {
      throw failure
    }
    const kept = keeper(storeRenewing()).keep(records)
    await vi.advanceTimersByTimeAsync(100)
    expect(reports).toEqual([
      { error: failure, context: 'the outbox relay could not renew its lease; it tries again' },
    ])
    answer = async () => 2
    await vi.advanceTimersByTimeAsync(100)
    expect(renewals).toHaveLength(2)
    expect(reports).toHaveLength(1)
    kept.stop()
  })

  it('never starts a renewal while the one before is still out', async () => {
    const records = await claimed(2)
    let finish: (still: number) => void = () => undefined
    answer = () => new Promise<number>((resolve) => (finish = resolve))
    const kept = keeper(storeRenewing()).keep(records)
    await vi.advanceTimersByTimeAsync(350)
    expect(renewals).toHaveLength(1)
    finish(2)
    await vi.advanceTimersByTimeAsync(50)
    expect(renewals).toHaveLength(2)
    kept.stop()
  })
})
