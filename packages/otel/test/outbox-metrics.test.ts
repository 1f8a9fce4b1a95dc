import { afterEach, beforeEach, expect, it } from 'vitest'
import { AceMq, InMemoryOutboxStore, InMemoryTransport, OutboxRecord, Topology } from '@acemq/core'
import { ACEMQ_METRICS, instrument } from '../src/index.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'

useOtelGlobals()
let otel: OtelHarness
let mq: AceMq

beforeEach(async () => {
  otel = new OtelHarness()
  mq = await AceMq.connect(new InMemoryTransport())
  await mq.applyTopology(Topology.define().queue('orders.placed'))
  instrument(mq, { tracerProvider: otel.tracerProvider, meterProvider: otel.meterProvider })
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
  await otel.shutdown()
})

it('counts the outbox relay’s records as acemq.outbox.total by outcome, with their lag in acemq.outbox.lag', async () => {
  const store = new InMemoryOutboxStore({ maxAttempts: 5, now: () => Date.now() - 3_000 })
  await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-1' }))
  await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-2' }))
  await store.add(OutboxRecord.of('', 'nobody.home', { id: 'o-3' }))
  await mq.outbox(store).drainOnce()

  const published = { exchange: '', 'routing.key': 'orders.placed', outcome: 'published' }
  const failed = { exchange: '', 'routing.key': 'nobody.home', outcome: 'failed' }
  expect(await otel.sum(ACEMQ_METRICS.outboxTotal, published)).toBe(2)
  expect(await otel.sum(ACEMQ_METRICS.outboxTotal, failed)).toBe(1)
  const lag = await otel.histogram(ACEMQ_METRICS.outboxLag, published)
  expect(lag?.count).toBe(2)
  expect(lag?.sum).toBeGreaterThanOrEqual(6)
  // Each relayed record is a publish, too.
  expect(
    await otel.sum(ACEMQ_METRICS.publishTotal, {
      'routing.key': 'orders.placed',
      outcome: 'confirmed',
    }),
  ).toBe(2)
})
