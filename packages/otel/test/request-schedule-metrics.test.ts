import { afterEach, beforeEach, expect, it } from 'vitest'
import { AceMq, InMemoryTransport, Topology } from '@acemq/core'
import { ACEMQ_METRICS, instrument } from '../src/index.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'

useOtelGlobals()
let otel: OtelHarness
let mq: AceMq

beforeEach(async () => {
  otel = new OtelHarness()
  mq = await AceMq.connect(new InMemoryTransport())
  instrument(mq, { tracerProvider: otel.tracerProvider, meterProvider: otel.meterProvider })
  await mq.applyTopology(Topology.define().queueWithDeadLetter('pricing').queue('later'))
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
  await otel.shutdown()
})

it('counts requests as acemq.request.total by role, destination and outcome', async () => {
  const responder = await mq.respond<number, number>('pricing', {}, (m) => m.payload * 2)
  const requester = mq.requester()
  expect(await requester.request('', 'pricing', 21)).toBe(42)
  await expect(requester.request('', 'nobody', 1)).rejects.toThrow()
  while (responder.answered === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  const labels = (role: string, destination: string, outcome: string) => ({
    role,
    destination,
    outcome,
  })
  expect(
    await otel.sum(ACEMQ_METRICS.requestTotal, labels('requester', '/pricing', 'answered')),
  ).toBe(1)
  expect(await otel.sum(ACEMQ_METRICS.requestTotal, labels('requester', '/nobody', 'failed'))).toBe(
    1,
  )
  expect(
    await otel.sum(ACEMQ_METRICS.requestTotal, labels('responder', 'pricing', 'answered')),
  ).toBe(1)
})

it('counts scheduled and delivered messages as acemq.schedule.total', async () => {
  const scheduler = mq.scheduler()
  await scheduler.startDelivering()
  await scheduler.in(0, '', 'later', { n: 1 })
  while (scheduler.delivered === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  const labels = (outcome: string) => ({ exchange: '', 'routing.key': 'later', outcome })
  expect(await otel.sum(ACEMQ_METRICS.scheduleTotal, labels('scheduled'))).toBe(1)
  expect(await otel.sum(ACEMQ_METRICS.scheduleTotal, labels('delivered'))).toBe(1)
})
