import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  InMemoryOutboxStore,
  InMemoryTransport,
  OutboxRecord,
  Topology,
  type Instrumentation,
} from '../../src/index.js'
import { readEnvelope, type OutboxRelayInfo } from '../../src/spi.js'
import { eventually } from '@acemq/testing'
import { gatedMarks } from './relay-doubles.js'

describe('the outbox relay on the in-memory transport', () => {
  let transport: InMemoryTransport
  let mq: AceMq
  let now = Date.UTC(2030, 0, 1)

  beforeEach(async () => {
    now = Date.UTC(2030, 0, 1)
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport, { origin: 'orders@test' })
    await mq.applyTopology(Topology.define().queue('orders.placed'))
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  it('publishes every pending record confirmed, with the record id as the envelope id, and marks it published', async () => {
    const store = new InMemoryOutboxStore({ now: () => now })
    const record = OutboxRecord.of(
      '',
      'orders.placed',
      { id: 'o-1' },
      {
        id: 'order-o-1',
        headers: { 'x-tenant': 'acme' },
        correlation: 'checkout-1',
      },
    )
    await store.add(record)
    await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-2' }))

    const relay = mq.outbox(store)
    expect(await relay.drainOnce()).toBe(2)

    expect(relay.published).toBe(2)
    expect(await store.pendingCount()).toBe(0)
    expect(store.isPublished('order-o-1')).toBe(true)
    const [first] = transport.peek('orders.placed')
    const { envelope, headers } = readEnvelope(first?.headers, { routingKey: 'orders.placed' })
    expect(envelope.id).toBe('order-o-1')
    expect(first?.properties.messageId).toBe('order-o-1')
    expect(envelope.correlation).toBe('checkout-1')
    expect(envelope.firstSeen).toBe(now)
    expect(envelope.origin).toBe('orders@test')
    expect(headers['x-tenant']).toBe('acme')
    expect(Buffer.from(first?.body ?? []).toString()).toBe('{"id":"o-1"}')
    expect(transport.messageCount('orders.placed')).toBe(2)
  })

  it('publishes mandatory: a record no queue takes is marked failed with the reason, then retired after maxAttempts', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 2 })
    await store.add(OutboxRecord.of('', 'nobody.listens', { id: 'lost?' }, { id: 'r-1' }))
    const relay = mq.outbox(store, { retryDelay: 0 })

    expect(await relay.drainOnce()).toBe(0)
    expect(relay.failed).toBe(1)
    expect(await store.pendingCount()).toBe(1)
    expect(await relay.drainOnce()).toBe(0)
    expect(relay.failed).toBe(2)
    expect(await store.pendingCount()).toBe(0)
    const [retired] = await store.retired()
    expect(retired?.id).toBe('r-1')
    expect(retired?.attempts).toBe(2)
    expect(retired?.lastError).toMatch(/could not route/)
    expect(await relay.drainOnce()).toBe(0)
    expect(relay.failed).toBe(2)
  })

  it('hands records back without counting a failure while the broker blocks the connection', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 1 })
    await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-3' }, { id: 'r-3' }))
    transport.block()
    await expect(mq.outbox(store).drainOnce()).rejects.toThrow(/could not publish/)
    expect(await store.retired()).toEqual([])
    transport.unblock()
    expect(await mq.outbox(store).drainOnce()).toBe(1)
  })

  it('relays in the background once started, reports its health, and stops with close()', async () => {
    const store = new InMemoryOutboxStore()
    const relay = mq.outbox(store, { poll: 10 })
    relay.start()
    expect(relay.isRunning).toBe(true)
    await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-4' }))
    await eventually(() => transport.messageCount('orders.placed') === 1, 5_000, 'the relay')
    const health = await mq.health()
    const report = health.reports.find((r) => r.name === 'outbox')
    expect(report?.status).toBe('UP')
    expect(report?.details).toMatchObject({
      running: 'true',
      pending: '0',
      retired: '0',
      published: '1',
    })
    await mq.close()
    expect(relay.isRunning).toBe(false)
  })

  it('is DEGRADED while a record is retired or the oldest pending record is older than the lag threshold', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 1, now: () => now })
    const relay = mq.outbox(store, { lagThreshold: '1m', poll: '1h' })
    relay.start()
    const report = async (): Promise<Record<string, string> & { status: string }> => {
      const found = (await mq.health()).reports.find((r) => r.name === 'outbox')
      return { status: found?.status ?? 'missing', ...found?.details }
    }
    transport.block()
    await store.add(OutboxRecord.of('', 'orders.placed', { id: 'late' }))
    now += 61_000
    expect(await report()).toMatchObject({ status: 'DEGRADED', pending: '1', lagSeconds: '61' })
    transport.unblock()
    await relay.drainOnce()
    expect((await report()).status).toBe('UP')
    await store.add(OutboxRecord.of('', 'no.such.queue', {}))
    await relay.drainOnce()
    expect(await report()).toMatchObject({ status: 'DEGRADED', retired: '1' })
    await relay.stop()
    expect((await mq.health()).reports.find((r) => r.name === 'outbox')).toBeUndefined()
  })

  it('counts published and failed records with their lag through the instrumentation', async () => {
    const relayed: OutboxRelayInfo[] = []
    const instrumentation: Instrumentation = {
      publishStarted: () => undefined,
      processStarted: () => undefined,
      outboxRelayed: (info) => relayed.push(info),
    }
    mq.setInstrumentation(instrumentation)
    const store = new InMemoryOutboxStore({ now: () => Date.now() - 2_000 })
    await store.add(OutboxRecord.of('', 'orders.placed', {}))
    await store.add(OutboxRecord.of('', 'nowhere', {}))
    await mq.outbox(store).drainOnce()
    expect(relayed.map((r) => [r.routingKey, r.outcome]).sort()).toEqual([
      ['nowhere', 'failed'],
      ['orders.placed', 'published'],
    ])
    expect(relayed.every((r) => r.lagMs >= 2_000)).toBe(true)
  })

  it('retires a record after the relay’s own maxAttempts when it is given', async () => {
    const store = new InMemoryOutboxStore({ maxAttempts: 10 })
    await store.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-limit' }))
    await mq.outbox(store, { maxAttempts: 1 }).drainOnce()
    expect((await store.retired()).map((r) => r.id)).toEqual(['r-limit'])
  })

  it('lets close() wait for the round under way: its publishes are confirmed and marked first', async () => {
    const inner = new InMemoryOutboxStore()
    // The in-memory store, with a mark that waits at a gate.
    const { store, marking, open: openGate } = gatedMarks(inner)
    await inner.add(OutboxRecord.of('', 'orders.placed', { id: 'o-9' }, { id: 'r-9' }))
    mq.outbox(store, { poll: 10 }).start()
    await eventually(marking, 5_000, 'the relay marking')
    let closed = false
    const closing = mq.close().then(() => (closed = true))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(closed).toBe(false)
    openGate()
    await closing
    expect(inner.isPublished('r-9')).toBe(true)
    expect(transport.messageCount('orders.placed')).toBe(1)
  })

  it('starts again while a stop is under way: the new run takes over the health report', async () => {
    const relay = mq.outbox(new InMemoryOutboxStore(), { poll: '1h' })
    relay.start()
    const stopping = relay.stop()
    relay.start()
    await stopping
    expect(relay.isRunning).toBe(true)
    const outbox = async (): Promise<Record<string, string> | undefined> =>
      (await mq.health()).reports.find((r) => r.name === 'outbox')?.details
    expect((await outbox())?.['running']).toBe('true')
    await relay.stop()
    expect(await outbox()).toBeUndefined()
  })

  it('refuses options that make no sense, and a second running relay under the same health name', () => {
    const store = new InMemoryOutboxStore()
    expect(() => mq.outbox(store, { batch: 0 })).toThrow(/batch/)
    expect(() => mq.outbox(store, { lease: 0 })).toThrow(/lease/)
    expect(() => mq.outbox(store, { maxAttempts: 0 })).toThrow(/maxAttempts/)
    expect(() => mq.outbox({} as InMemoryOutboxStore)).toThrow(/OutboxStore/)
    mq.outbox(store).start()
    expect(() => mq.outbox(store).start()).toThrow(/taken/)
    mq.outbox(store, { name: 'outbox:audit' }).start()
  })
})
