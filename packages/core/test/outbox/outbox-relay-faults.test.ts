import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  InMemoryOutboxStore,
  InMemoryTransport,
  OutboxRecord,
  PublishFailedError,
  Topology,
  errorCodeOf,
} from '../../src/index.js'
import { type OutgoingMessage, type TransportPublishOptions } from '../../src/spi.js'
import { outboxStoreReplacing } from '@acemq/testing'
import { HoldingTransport, sentTwice } from './relay-doubles.js'

/**
 * The in-memory transport with two faults a broker has: publishes held (as under a memory
 * alarm) while `holding`, and a channel that closes on a publish to `closesOn`, failing every
 * publish in flight with it (the AMQP transport's "channel closed before the confirm").
 */
class FaultyTransport extends HoldingTransport {
  closesOn: string | undefined
  #window: { message: OutgoingMessage; fail: (error: unknown) => void }[] | undefined

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    if (this.closesOn === undefined) return super.publish(message, options)
    await this.whileHeld()
    // Publishes made in one turn share a channel: one to `closesOn` closes it for all of them.
    return new Promise<void>((resolve, reject) => {
      if (this.#window === undefined) {
        const window: { message: OutgoingMessage; fail: (error: unknown) => void }[] = []
        this.#window = window
        setTimeout(() => {
          this.#window = undefined
          if (!window.some((entry) => entry.message.exchange === this.closesOn)) return
          // From now on the transport checks that exchange before a publish (the AMQP
          // transport forgets an exchange a 404 named): a publish to it fails alone.
          const closed = new PublishFailedError(
            `the channel closed before the broker confirmed the message, so it may or may not have been delivered: NOT_FOUND - no exchange '${String(this.closesOn)}'`,
          )
          for (const entry of window) entry.fail(closed)
          this.closesOn = undefined
        }, 5)
      }
      let settled = false
      this.#window.push({
        message,
        fail: (error) => {
          settled = true
          reject(error)
        },
      })
      setTimeout(() => {
        if (!settled) super.publish(message, options).then(resolve, reject)
      }, 10)
    })
  }
}

describe('the outbox relay under faults (in-memory transport)', () => {
  let transport: FaultyTransport
  let mq: AceMq
  let now = Date.UTC(2030, 0, 1)
  let reports: { error: unknown; context: string }[]

  beforeEach(async () => {
    now = Date.UTC(2030, 0, 1)
    reports = []
    transport = new FaultyTransport()
    mq = await AceMq.connect(transport, {
      origin: 'orders@test',
      onError: (error, context) => reports.push({ error, context }),
    })
    await mq.applyTopology(Topology.define().queue('orders.placed'))
  })

  afterEach(async () => {
    transport.releaseHeld()
    await mq.close({ drainTimeout: 0 })
  })

  async function addOrders(store: InMemoryOutboxStore, count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      await store.add(OutboxRecord.of('', 'orders.placed', { i }, { id: `o-${i}` }))
    }
  }

  it('retries a mark that failed once: no batch is published twice (issue 27 item 6)', async () => {
    const inner = new InMemoryOutboxStore({ now: () => now })
    await addOrders(inner, 30)
    let failures = 1
    const store = outboxStoreReplacing(inner, {
      markPublished: async (ids) => {
        if (failures-- > 0) throw new Error('connection terminated unexpectedly')
        await inner.markPublished(ids)
      },
    })
    const relay = mq.outbox(store, { batch: 10 })
    await relay.drainOnce().catch(() => undefined)
    now += 60_000
    await relay.drainOnce()
    expect(transport.messageCount('orders.placed')).toBe(30)
    expect(sentTwice(transport, 'orders.placed')).toEqual([])
    expect(await inner.pendingCount()).toBe(0)
  })

  it('marks the pipelined next batch even when one batch’s mark keeps failing: only that batch goes out again (issue 27 item 6)', async () => {
    const inner = new InMemoryOutboxStore({ now: () => now })
    await addOrders(inner, 30)
    const store = outboxStoreReplacing(inner, {
      markPublished: async (ids) => {
        if ([ids].flat().includes('o-0')) throw new Error('deadlock detected')
        await inner.markPublished(ids)
      },
    })
    const relay = mq.outbox(store, { batch: 10 })
    await expect(relay.drainOnce()).rejects.toThrow(/deadlock detected/)
    expect(await inner.pendingCount()).toBe(20)
    now += 60_000
    // The batch whose mark never happened is published again, and only that one.
    await mq.outbox(inner, { batch: 10, name: 'outbox:second' }).drainOnce()
    expect(transport.messageCount('orders.placed')).toBe(40)
    expect(sentTwice(transport, 'orders.placed')).toEqual(
      Array.from({ length: 10 }, (_, i) => `o-${i}`).sort(),
    )
  })

  it('renews the lease while a batch is held: a second relay publishes none of it (issue 27 item 7)', async () => {
    const store = new InMemoryOutboxStore()
    await addOrders(store, 20)
    transport.holding = true
    const first = mq.outbox(store, { batch: 50, lease: 300 })
    const holding = first.drainOnce()
    await new Promise((resolve) => setTimeout(resolve, 50))
    transport.holding = false
    // Three leases later, while the first relay's publishes are still held.
    await new Promise((resolve) => setTimeout(resolve, 900))
    const second = mq.outbox(store, { batch: 50, lease: 300, name: 'outbox:b' })
    expect(await second.drainOnce()).toBe(0)
    transport.releaseHeld()
    expect(await holding).toBe(20)
    expect(transport.messageCount('orders.placed')).toBe(20)
  })

  it('charges only the record whose exchange is gone when the channel closes on it (issue 27 item 9)', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 1 })
    for (let i = 0; i < 99; i++) {
      await store.add(OutboxRecord.of('', 'orders.placed', { i }, { id: `o-${i}` }))
    }
    await store.add(OutboxRecord.of('deleted.exchange', 'x', {}, { id: 'doomed' }))
    transport.closesOn = 'deleted.exchange'
    const relay = mq.outbox(store, { batch: 100 })
    expect(await relay.drainOnce()).toBe(99)
    expect(relay.failed).toBe(1)
    expect((await store.retired()).map((r) => r.id)).toEqual(['doomed'])
    expect(transport.messageCount('orders.placed')).toBe(99)
  })

  it('backs a failing record off exponentially up to a cap, instead of retiring it within seconds (issue 27 item 10)', async () => {
    const store = new InMemoryOutboxStore({ now: () => now, maxAttempts: 10 })
    await store.add(OutboxRecord.of('missing.exchange', 'x', {}, { id: 'r-1' }))
    const relay = mq.outbox(store, { retryDelay: '5s', maxRetryDelay: '30s' })
    const waits: number[] = []
    await relay.drainOnce()
    expect(relay.failed).toBe(1)
    for (let attempt = 2; attempt <= 6; attempt++) {
      // Not offered again before its back-off has passed.
      let waited = 0
      while (relay.failed < attempt) {
        now += 1_000
        waited += 1_000
        await relay.drainOnce()
        if (waited > 120_000) throw new Error('never offered again')
      }
      waits.push(waited)
    }
    expect(waits).toEqual([5_000, 10_000, 20_000, 30_000, 30_000])
    expect(await store.retired()).toEqual([])
  })

  it('uses the documented default back-off: 5 s doubling to 10 min, about 30 minutes before the 10th failure retires a record', () => {
    const store = new InMemoryOutboxStore()
    const relay = mq.outbox(store)
    expect(relay.retryDelayMs).toBe(5_000)
    expect(relay.maxRetryDelayMs).toBe(600_000)
  })

  it('reports each failed attempt, and each retirement with the way back, through onError by default (issue 35 item 2)', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 2, now: () => now })
    await store.add(OutboxRecord.of('', 'nobody.listens', {}, { id: 'r-lost' }))
    const relay = mq.outbox(store, { retryDelay: 0 })
    await relay.drainOnce()
    await relay.drainOnce()
    const contexts = reports.map((report) => report.context)
    expect(contexts[0]).toMatch(/could not publish outbox record 'r-lost'.*failed attempt 1 of 2/)
    const retirement = reports.find((report) => /retired/.test(messageOf(report.error)))
    expect(messageOf(retirement?.error)).toMatch(/'r-lost' was retired after 2 failed publishes/)
    expect(messageOf(retirement?.error)).toMatch(/reoffer/)
    expect(errorCodeOf(retirement?.error)).toBe('ACEMQ_UNROUTABLE')
  })

  it('says a claim failed, not that a batch could not be handed back, when the outbox table is missing (issue 27 item 12)', async () => {
    const missing = Object.assign(new Error('relation "acemq_outbox" does not exist'), {
      code: 'ACEMQ_STORE_TABLE_MISSING',
    })
    const store = outboxStoreReplacing(new InMemoryOutboxStore(), {
      claimBatch: () => Promise.reject(missing),
    })
    await expect(mq.outbox(store).drainOnce()).rejects.toBe(missing)
    expect(reports.map((report) => report.context).join('\n')).not.toMatch(/hand back/)
  })
})

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

describe('the outbox relay with the connection’s default error reporting', () => {
  it('prints a failed attempt and a retirement as AceMqWarnings with no onError given (issue 35 item 2)', async () => {
    const warnings: Error[] = []
    const listen = (warning: Error): void => {
      if (warning.name === 'AceMqWarning') warnings.push(warning)
    }
    process.on('warning', listen)
    const mq = await AceMq.connect(new InMemoryTransport())
    try {
      const store = new InMemoryOutboxStore({ maxAttempts: 2 })
      await store.add(OutboxRecord.of('', 'nobody.listens', {}, { id: 'r-heard' }))
      const relay = mq.outbox(store, { retryDelay: 0 })
      await relay.drainOnce()
      await relay.drainOnce()
      await new Promise((resolve) => setImmediate(resolve))
      const lines = warnings.map((warning) => warning.message)
      expect(lines.some((line) => /could not publish outbox record 'r-heard'/.test(line))).toBe(
        true,
      )
      expect(
        lines.some((line) => /'r-heard' was retired after 2 failed publishes/.test(line)),
      ).toBe(true)
    } finally {
      process.off('warning', listen)
      await mq.close({ drainTimeout: 0 })
    }
  })
})
