import { afterEach, beforeEach, expect, it } from 'vitest'
import { AceMq, InMemoryTransport } from '@acemq/core'
import { ACEMQ_METRICS, instrument } from '../src/index.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'

useOtelGlobals()
let otel: OtelHarness
let mq: AceMq

beforeEach(async () => {
  otel = new OtelHarness()
  mq = await AceMq.connect(new InMemoryTransport())
  instrument(mq, { tracerProvider: otel.tracerProvider, meterProvider: otel.meterProvider })
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
  await otel.shutdown()
})

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('the runs did not finish within 10 s')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

it('counts finished runs as acemq.pipeline.run.total by pipeline, step and outcome, with their age in acemq.pipeline.run.duration', async () => {
  const checkout = await mq
    .pipeline<{ total: number }>('checkout')
    .step('reserve', async (order) => order)
    .step('charge', async (order) => (order.total > 0 ? order : null))
    .step('ship', async (order) => order)
    .build()
  await checkout.send({ total: 5 }, { firstSeen: Date.now() - 2_000 })
  await checkout.send({ total: 5 })
  await checkout.send({ total: 0 })
  await until(() => checkout.completed === 2 && checkout.endedEarly === 1)

  const completed = { pipeline: 'checkout', step: 'ship', outcome: 'completed' }
  const endedEarly = { pipeline: 'checkout', step: 'charge', outcome: 'ended_early' }
  expect(await otel.sum(ACEMQ_METRICS.pipelineRunTotal, completed)).toBe(2)
  expect(await otel.sum(ACEMQ_METRICS.pipelineRunTotal, endedEarly)).toBe(1)
  const duration = await otel.histogram(ACEMQ_METRICS.pipelineRunDuration, completed)
  expect(duration?.count).toBe(2)
  // The run's age, from its first publish: the one sent "2 s ago" took at least that long.
  expect(duration?.sum).toBeGreaterThanOrEqual(2)
})

it('puts every step of a run in one trace: each step a process span whose parent is the hop that sent it', async () => {
  const checkout = await mq
    .pipeline<{ total: number }>('checkout')
    .step('reserve', async (order) => order)
    .step('charge', async (order) => order)
    .build()
  await checkout.send({ total: 5 })
  await until(() => checkout.completed === 1)

  const [reserve] = otel.spans('checkout.reserve process')
  const [charge] = otel.spans('checkout.charge process')
  // The send and the hop both go to the pipeline's exchange (docs/design.md §15), in that order.
  const [sent, hop] = otel.spans('checkout publish')
  expect(reserve && charge && sent && hop).toBeTruthy()
  const trace = sent?.spanContext().traceId
  for (const span of [reserve, hop, charge]) expect(span?.spanContext().traceId).toBe(trace)
  expect(reserve?.parentSpanContext?.spanId).toBe(sent?.spanContext().spanId)
  expect(hop?.parentSpanContext?.spanId).toBe(reserve?.spanContext().spanId)
  expect(charge?.parentSpanContext?.spanId).toBe(hop?.spanContext().spanId)
})
