import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  InMemoryOutboxStore,
  OutboxRecord,
  Topology,
  errorCodeOf,
  type AceMq,
  type OutboxStore,
} from '@acemq/core'
import { type Transport } from '@acemq/core/spi'
import {
  closeScenario,
  openScenario,
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'
import { uniqueName } from '../services/services.js'

/** A transport whose publishes wait at a gate while it is shut (a broker alarm on one relay). */
interface HeldTransport extends Transport {
  /** Publishes from now on wait. */
  hold(): void
  /** Publishes from now on go through; those held so far keep waiting. */
  stopHolding(): void
  /** Every publish goes through, those held so far too. */
  letGo(): void
}

function holding(inner: Transport): HeldTransport {
  let shut = false
  let open: () => void = () => undefined
  let gate = Promise.resolve()
  return new Proxy(inner, {
    get(target, property) {
      if (property === 'hold') {
        return () => {
          shut = true
          gate = new Promise<void>((resolve) => (open = resolve))
        }
      }
      if (property === 'stopHolding') {
        return () => {
          shut = false
        }
      }
      if (property === 'letGo') {
        return () => {
          shut = false
          open()
        }
      }
      if (property === 'publish') {
        return (...args: Parameters<Transport['publish']>) =>
          shut ? gate.then(() => target.publish(...args)) : target.publish(...args)
      }
      const value: unknown = Reflect.get(target, property, target)
      return typeof value === 'function' ? (value as () => unknown).bind(target) : value
    },
  }) as HeldTransport
}

/**
 * The in-memory outbox store with some of its methods replaced — a mark that fails, a claim
 * that waits — for tests of the relay.
 *
 * @example
 * ```ts
 * const store = outboxStoreReplacing(inner, { markPublished: async () => { throw new Error('down') } })
 * ```
 */
export function outboxStoreReplacing(
  inner: InMemoryOutboxStore,
  replaced: Partial<OutboxStore>,
): OutboxStore {
  return {
    claimBatch: (batch, lease) => inner.claimBatch(batch, lease),
    renew: (ids, lease, leaseMs) => inner.renew(ids, lease, leaseMs),
    markPublished: (ids) => inner.markPublished(ids),
    markFailed: (id, reason, options) => inner.markFailed(id, reason, options),
    release: (ids, lease) => inner.release(ids, lease),
    pendingCount: () => inner.pendingCount(),
    retired: (limit) => inner.retired(limit),
    reoffer: (ids) => inner.reoffer(ids),
    stats: () => inner.stats(),
    ...replaced,
  }
}

/** How many copies of each message id wait in `queue` (taken off it). */
async function copiesIn(probe: BrokerProbe, queue: string): Promise<Map<string, number>> {
  const copies = new Map<string, number>()
  for (;;) {
    const message = await probe.get(queue)
    if (message === undefined) return copies
    const id = String(message.messageId)
    copies.set(id, (copies.get(id) ?? 0) + 1)
  }
}

/**
 * The outbox relay's duplicates and reports on a transport: a failed mark costs no batch
 * published twice, a batch whose publishes are held keeps its lease, and a retirement is
 * always reported — the same cases on every transport.
 */
export function outboxScenarios(name: string, target: ScenarioTarget): void {
  describe(`the outbox relay on ${name}`, () => {
    let connection: ScenarioConnection<HeldTransport>
    let mq: AceMq
    let probe: BrokerProbe
    const queues: string[] = []
    let queue: string
    let now = Date.UTC(2030, 0, 1)
    let reports: { error: unknown; context: string }[]

    beforeEach(async () => {
      now = Date.UTC(2030, 0, 1)
      reports = []
      connection = await openScenario(target, holding, {
        onError: (error, context) => reports.push({ error, context }),
      })
      mq = connection.mq
      probe = connection.probe
      queue = uniqueName('outbox')
      queues.push(queue)
      await mq.applyTopology(Topology.define().queue(queue))
    })

    afterEach(async () => {
      connection.transport.letGo()
      await closeScenario(connection, queues)
    })

    async function addRecords(store: InMemoryOutboxStore, count: number): Promise<string[]> {
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const id = `${queue}-${i}`
        ids.push(id)
        await store.add(OutboxRecord.of('', queue, { i }, { id }))
      }
      return ids
    }

    it('retries a mark that failed once: no record is published twice', async () => {
      const inner = new InMemoryOutboxStore({ now: () => now })
      const ids = await addRecords(inner, 30)
      let failures = 1
      const store = outboxStoreReplacing(inner, {
        markPublished: async (marked) => {
          if (failures-- > 0) throw new Error('the database connection was reset')
          await inner.markPublished(marked)
        },
      })
      const relay = mq.outbox(store, { batch: 10 })
      expect(await relay.drainOnce()).toBe(30)
      now += 60_000
      expect(await relay.drainOnce()).toBe(0)
      const copies = await copiesIn(probe, queue)
      expect([...copies.keys()].sort()).toEqual([...ids].sort())
      expect([...copies.values()].every((n) => n === 1)).toBe(true)
    })

    it('a mark that keeps failing costs its own batch only: the pipelined next batch is marked', async () => {
      const inner = new InMemoryOutboxStore({ now: () => now })
      const ids = await addRecords(inner, 30)
      const first = new Set(ids.slice(0, 10))
      const store = outboxStoreReplacing(inner, {
        markPublished: async (marked) => {
          if ([marked].flat().some((id) => first.has(id))) throw new Error('deadlock detected')
          await inner.markPublished(marked)
        },
      })
      await expect(mq.outbox(store, { batch: 10 }).drainOnce()).rejects.toThrow(/deadlock/)
      now += 60_000
      await mq.outbox(inner, { batch: 10, name: 'outbox:again' }).drainOnce()
      const copies = await copiesIn(probe, queue)
      const twice = [...copies.entries()].filter(([, n]) => n > 1).map(([id]) => id)
      expect(twice.sort()).toEqual([...first].sort())
      expect(await inner.pendingCount()).toBe(0)
    })

    it('keeps the lease of a batch whose publishes are held: a second relay publishes none of it', async () => {
      const store = new InMemoryOutboxStore()
      const ids = await addRecords(store, 20)
      connection.transport.hold()
      const held = mq.outbox(store, { batch: 50, lease: 300 }).drainOnce()
      await new Promise((resolve) => setTimeout(resolve, 100))
      // Three leases pass while the first relay's publishes wait; the second relay's go through.
      connection.transport.stopHolding()
      await new Promise((resolve) => setTimeout(resolve, 900))
      const second = mq.outbox(store, { batch: 50, lease: 300, name: 'outbox:second' })
      expect(await second.drainOnce()).toBe(0)
      connection.transport.letGo()
      expect(await held).toBe(20)
      const copies = await copiesIn(probe, queue)
      expect([...copies.keys()].sort()).toEqual([...ids].sort())
      expect([...copies.values()].every((n) => n === 1)).toBe(true)
    })

    it('reports the retirement of a record no queue takes, with the record and the way back', async () => {
      const store = new InMemoryOutboxStore({ maxAttempts: 1 })
      await store.add(OutboxRecord.of('', uniqueName('nobody'), {}, { id: `${queue}-lost` }))
      const relay = mq.outbox(store)
      await relay.drainOnce()
      const retirement = reports.find((report) => /retired/.test(String(report.error)))
      expect(String(retirement?.error)).toContain(`'${queue}-lost' was retired after 1`)
      expect(String(retirement?.error)).toContain('reoffer')
      expect(errorCodeOf(retirement?.error)).toBe('ACEMQ_UNROUTABLE')
    })
  })
}
