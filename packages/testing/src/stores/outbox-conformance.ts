import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { OutboxRecord, type OutboxStore } from '@acemq/core'

/** What a conformance run is given to build the store under test. */
export interface OutboxConformanceOptions {
  /** Failed publishes before a record is retired. */
  readonly maxAttempts: number
  /** The clock the store must read (epoch ms); the suite moves it instead of sleeping. */
  readonly now: () => number
}

/** A store under test, with ways to add records and to get a second relay's view. */
export interface OutboxConformanceFixture {
  readonly store: OutboxStore
  /** Another instance on the same backing data, as a second process would have. */
  second(): Promise<OutboxStore>
  /** Adds a record in a transaction of the store's kind that commits. */
  add(record: OutboxRecord): Promise<void>
  /**
   * Adds a record in a transaction that then rolls back, rejecting with an error saying
   * `roll back`; undefined for a store with no transactions.
   */
  readonly addAndRollBack: ((record: OutboxRecord) => Promise<void>) | undefined
  /** Closes every instance and removes the backing data. */
  cleanup(): Promise<void>
}

/** Builds one fresh fixture per test. */
export interface OutboxConformanceFactory {
  /** Whether `add` writes in a transaction of the caller's (every SQL store). */
  readonly transactional: boolean
  create(options: OutboxConformanceOptions): Promise<OutboxConformanceFixture>
}

const START = Date.UTC(2030, 0, 1)
const LEASE = 30_000
const MAX_ATTEMPTS = 3

/**
 * Registers the cases every outbox store must pass: records kept byte for byte, oldest
 * first, leases that keep a record from a second relay until they run out, marks, failures
 * counted with their reason, retirement after the attempts, hand-backs that count nothing,
 * the stats the health report reads, concurrent claims that never share a record, and adds
 * that live and die with their transaction.
 *
 * @example
 * ```ts
 * outboxStoreConformance('in-memory', { async create(o) { ... } })
 * ```
 */
export function outboxStoreConformance(name: string, factory: OutboxConformanceFactory): void {
  describe(`${name}: the outbox store contract`, () => {
    let clock = START
    let fixture: OutboxConformanceFixture
    let store: OutboxStore
    let seq = 0
    const advance = (ms: number): void => {
      clock += ms
    }
    const record = (label: string, payload: unknown = { label }): OutboxRecord =>
      OutboxRecord.of('', `queue.${label}`, payload, { id: `${label}-${++seq}-${Date.now()}` })

    beforeEach(async () => {
      clock = START
      fixture = await factory.create({ maxAttempts: MAX_ATTEMPTS, now: () => clock })
      store = fixture.store
    })

    afterEach(async () => {
      await fixture.cleanup()
    })

    it('keeps a record byte for byte: id, exchange, routing key, body, content type, headers and envelope', async () => {
      const original = OutboxRecord.of('orders', 'order.placed', 'zamówienie 🚀 注文', {
        id: `ordre-é-${++seq}`,
        contentType: 'text/plain',
        headers: { 'x-tenant': 'acme', 'x-priority': 7, 'x-urgent': true },
        type: 'OrderPlaced',
        correlation: 'checkout-42',
        causation: 'cart-9',
        version: 2,
      })
      await fixture.add(original)
      const [claimed] = await store.claimBatch(10, LEASE)
      expect(claimed).toBeDefined()
      expect(claimed?.id).toBe(original.id)
      expect(claimed?.exchange).toBe('orders')
      expect(claimed?.routingKey).toBe('order.placed')
      expect(Buffer.from(claimed?.body ?? []).toString('utf8')).toBe('zamówienie 🚀 注文')
      expect(claimed?.contentType).toBe('text/plain')
      expect(claimed?.headers).toEqual({ 'x-tenant': 'acme', 'x-priority': 7, 'x-urgent': true })
      expect(claimed?.envelope).toEqual({
        type: 'OrderPlaced',
        correlation: 'checkout-42',
        causation: 'cart-9',
        version: 2,
      })
      expect(claimed?.createdAt).toBe(START)
      expect(claimed?.attempts).toBe(0)
      expect(claimed?.lastError).toBeUndefined()
    })

    it('offers pending records oldest first, at most a batch at a time', async () => {
      const ids: string[] = []
      for (let i = 0; i < 5; i++) {
        const r = record(`order${i}`)
        ids.push(r.id)
        await fixture.add(r)
        advance(1)
      }
      const first = await store.claimBatch(3, LEASE)
      expect(first.map((r) => r.id)).toEqual(ids.slice(0, 3))
      const rest = await store.claimBatch(3, LEASE)
      expect(rest.map((r) => r.id)).toEqual(ids.slice(3))
      expect(await store.claimBatch(3, LEASE)).toEqual([])
    })

    it('keeps a leased record from a second relay until the lease runs out', async () => {
      const r = record('leased')
      await fixture.add(r)
      const other = await fixture.second()
      expect((await store.claimBatch(10, LEASE)).map((x) => x.id)).toEqual([r.id])
      expect(await other.claimBatch(10, LEASE)).toEqual([])
      advance(LEASE - 1)
      expect(await other.claimBatch(10, LEASE)).toEqual([])
      advance(2)
      expect((await other.claimBatch(10, LEASE)).map((x) => x.id)).toEqual([r.id])
    })

    it('never offers a record marked published again, and counts it out of the pending', async () => {
      const a = record('a')
      const b = record('b')
      const c = record('c')
      for (const r of [a, b, c]) await fixture.add(r)
      expect(await store.pendingCount()).toBe(3)
      await store.claimBatch(10, LEASE)
      await store.markPublished(a.id)
      await store.markPublished([b.id, c.id])
      expect(await store.pendingCount()).toBe(0)
      advance(LEASE * 10)
      expect(await store.claimBatch(10, LEASE)).toEqual([])
      expect(await (await fixture.second()).claimBatch(10, LEASE)).toEqual([])
    })

    it('counts a failed publish with its reason and offers the record again at once', async () => {
      const r = record('failing')
      await fixture.add(r)
      await store.claimBatch(10, LEASE)
      expect(await store.markFailed(r.id, 'NO_ROUTE: no queue is bound')).toBe('pending')
      const [again] = await (await fixture.second()).claimBatch(10, LEASE)
      expect(again?.id).toBe(r.id)
      expect(again?.attempts).toBe(1)
      expect(again?.lastError).toBe('NO_ROUTE: no queue is bound')
    })

    it('retires a record after maxAttempts failures: kept, listed with its reason, never offered again', async () => {
      const r = record('doomed')
      const healthy = record('healthy')
      await fixture.add(r)
      await fixture.add(healthy)
      await store.markPublished(healthy.id)
      const outcomes: string[] = []
      for (let i = 1; i <= MAX_ATTEMPTS; i++) {
        const claimed = await store.claimBatch(10, LEASE)
        expect(claimed.map((x) => x.id)).toEqual([r.id])
        outcomes.push(await store.markFailed(r.id, `refused ${i}`))
      }
      expect(outcomes).toEqual(['pending', 'pending', 'retired'])
      advance(LEASE * 10)
      expect(await store.claimBatch(10, LEASE)).toEqual([])
      expect(await store.pendingCount()).toBe(0)
      const retired = await store.retired()
      expect(retired.map((x) => [x.id, x.attempts, x.lastError])).toEqual([
        [r.id, MAX_ATTEMPTS, `refused ${MAX_ATTEMPTS}`],
      ])
      expect(retired[0]?.retiredAt).toBe(START)
      expect(Buffer.from(retired[0]?.body ?? []).toString()).toContain('doomed')
      const stats = await store.stats()
      expect(stats.retired).toBe(1)
      expect(stats.pending).toBe(0)
    })

    it('retires at the maxAttempts markFailed is given, whatever its own', async () => {
      const r = record('relay-limit')
      await fixture.add(r)
      await store.claimBatch(10, LEASE)
      expect(await store.markFailed(r.id, 'refused once', 1)).toBe('retired')
      expect((await store.retired()).map((x) => x.id)).toEqual([r.id])
      await expect(store.markFailed(r.id, 'again', 0)).rejects.toThrow(/maxAttempts/)
    })

    it('hands a record back without counting a failure when released', async () => {
      const r = record('handed-back')
      await fixture.add(r)
      await store.claimBatch(10, LEASE)
      await store.release(r.id)
      const [again] = await (await fixture.second()).claimBatch(10, LEASE)
      expect(again?.id).toBe(r.id)
      expect(again?.attempts).toBe(0)
    })

    it('hands each claimed record out under its claim’s lease token', async () => {
      await fixture.add(record('token-a'))
      await fixture.add(record('token-b'))
      const claimed = await store.claimBatch(10, LEASE)
      expect(claimed).toHaveLength(2)
      expect(typeof claimed[0]?.lease).toBe('string')
      expect(claimed[1]?.lease).toBe(claimed[0]?.lease)
      await fixture.add(record('token-c'))
      const [next] = await store.claimBatch(10, LEASE)
      expect(next?.lease).not.toBe(claimed[0]?.lease)
    })

    it('renews the lease of a batch still in flight, so a second relay gets nothing past the first lease', async () => {
      const r = record('renewed')
      await fixture.add(r)
      const [claimed] = await store.claimBatch(10, LEASE)
      const other = await fixture.second()
      advance(LEASE - 1_000)
      expect(await store.renew([r.id], claimed?.lease ?? '', LEASE)).toBe(1)
      advance(2_000)
      expect(await other.claimBatch(10, LEASE)).toEqual([])
      advance(LEASE)
      expect((await other.claimBatch(10, LEASE)).map((x) => x.id)).toEqual([r.id])
    })

    it('lets a holder whose lease lapsed renew nothing, release nothing and charge nothing', async () => {
      const r = record('lapsed')
      await fixture.add(r)
      const [first] = await store.claimBatch(10, LEASE)
      advance(LEASE + 1)
      const second = await fixture.second()
      const [taken] = await second.claimBatch(10, LEASE)
      expect(taken?.id).toBe(r.id)
      expect(taken?.lease).not.toBe(first?.lease)
      const late = first?.lease ?? ''
      expect(await store.renew(r.id, late, LEASE)).toBe(0)
      await store.release(r.id, late)
      expect(await store.markFailed(r.id, 'late failure', { lease: late })).toBe('lapsed')
      // The second relay still holds it: a third gets nothing, and no attempt was charged.
      const third = await fixture.second()
      expect(await third.claimBatch(10, LEASE)).toEqual([])
      expect(await second.renew(r.id, taken?.lease ?? '', LEASE)).toBe(1)
      await second.release(r.id, taken?.lease)
      const [again] = await third.claimBatch(10, LEASE)
      expect(again?.attempts).toBe(0)
      expect(again?.lastError).toBeUndefined()
    })

    it('records a confirm from a holder whose lease lapsed: the record was published', async () => {
      const r = record('confirmed-late')
      await fixture.add(r)
      await store.claimBatch(10, LEASE)
      advance(LEASE + 1)
      const second = await fixture.second()
      expect((await second.claimBatch(10, LEASE)).map((x) => x.id)).toEqual([r.id])
      await store.markPublished(r.id)
      expect(await store.pendingCount()).toBe(0)
      advance(LEASE * 3)
      expect(await second.claimBatch(10, LEASE)).toEqual([])
    })

    it('holds a failed record back for the back-off markFailed is given, then offers it again', async () => {
      const r = record('backed-off')
      await fixture.add(r)
      const [claimed] = await store.claimBatch(10, LEASE)
      expect(
        await store.markFailed(r.id, 'NOT_FOUND', { lease: claimed?.lease, retryInMs: 60_000 }),
      ).toBe('pending')
      expect(await store.claimBatch(10, LEASE)).toEqual([])
      advance(59_999)
      expect(await (await fixture.second()).claimBatch(10, LEASE)).toEqual([])
      advance(2)
      const [again] = await store.claimBatch(10, LEASE)
      expect(again?.id).toBe(r.id)
      expect(again?.attempts).toBe(1)
      expect(await store.pendingCount()).toBe(1)
    })

    it('offers retired records again when re-offered: the ones named, or all, with no attempts counted', async () => {
      const a = record('retired-a')
      const b = record('retired-b')
      const c = record('retired-c')
      for (const r of [a, b, c]) {
        await fixture.add(r)
        advance(1)
      }
      for (const r of [a, b, c]) {
        await store.claimBatch(1, LEASE)
        expect(await store.markFailed(r.id, 'gone', { maxAttempts: 1 })).toBe('retired')
      }
      expect((await store.retired()).map((x) => x.id).sort()).toEqual([a.id, b.id, c.id].sort())
      expect(await store.reoffer([b.id, 'no-such-record'])).toBe(1)
      const [back] = await store.claimBatch(10, LEASE)
      expect(back?.id).toBe(b.id)
      expect(back?.attempts).toBe(0)
      expect(back?.lastError).toBe('gone')
      expect((await store.retired()).map((x) => x.id).sort()).toEqual([a.id, c.id].sort())
      expect(await store.reoffer()).toBe(2)
      expect(await store.reoffer()).toBe(0)
      expect((await store.claimBatch(10, LEASE)).map((x) => x.id)).toEqual([a.id, c.id])
      expect(await store.stats()).toMatchObject({ pending: 3, retired: 0 })
    })

    it('refuses a lease token or back-off that makes no sense', async () => {
      await expect(store.renew('x', '', LEASE)).rejects.toThrow(/lease/)
      await expect(store.renew('x', 'token', 0)).rejects.toThrow(/leaseMs/)
      await fixture.add(record('checked'))
      const [r] = await store.claimBatch(10, LEASE)
      await expect(
        store.markFailed(r?.id ?? '', 'x', { lease: r?.lease, retryInMs: -1 }),
      ).rejects.toThrow(/retryInMs/)
    })

    it('tells the pending count, the retired count and when the oldest pending record was added', async () => {
      expect(await store.stats()).toMatchObject({
        pending: 0,
        retired: 0,
        oldestPendingAt: undefined,
      })
      await fixture.add(record('old'))
      advance(5_000)
      await fixture.add(record('new'))
      advance(1_000)
      const stats = await store.stats()
      expect(stats.pending).toBe(2)
      expect(stats.oldestPendingAt).toBe(START)
      expect(stats.now).toBe(START + 6_000)
    })

    it('never gives one record to two relays claiming at the same time', async () => {
      const ids: string[] = []
      for (let i = 0; i < 60; i++) {
        const r = record(`race${i}`)
        ids.push(r.id)
        await fixture.add(r)
      }
      const relays = [store, await fixture.second(), await fixture.second()]
      const claimed: string[] = []
      await Promise.all(
        relays.map(async (relay) => {
          for (let round = 0; round < 8; round++) {
            for (const r of await relay.claimBatch(7, LEASE)) claimed.push(r.id)
          }
        }),
      )
      expect(claimed.length).toBe(new Set(claimed).size)
      expect([...claimed].sort()).toEqual([...ids].sort())
    })

    it('refuses a second record with an id the outbox already has', async () => {
      const r = record('twice')
      await fixture.add(r)
      await expect(fixture.add(r)).rejects.toThrow()
      expect(await store.pendingCount()).toBe(1)
    })

    // Only a store with transactions has this case (the in-memory one writes at once).
    if (factory.transactional) {
      it('keeps no record whose transaction rolled back', async () => {
        const r = record('rolled-back')
        await expect(fixture.addAndRollBack?.(r)).rejects.toThrow('roll back')
        expect(await store.pendingCount()).toBe(0)
        expect(await store.claimBatch(10, LEASE)).toEqual([])
      })
    }

    it('refuses a batch or lease that makes no sense', async () => {
      await expect(store.claimBatch(0, LEASE)).rejects.toThrow(/batch/)
      await expect(store.claimBatch(10, 0)).rejects.toThrow(/lease/)
    })
  })
}
