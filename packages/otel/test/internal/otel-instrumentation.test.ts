import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ROOT_CONTEXT, SpanStatusCode, context, trace } from '@opentelemetry/api'
import { UnroutableError, type Headers } from '@acemq/core'
import { ACEMQ_ATTRIBUTES, ACEMQ_METRICS, instrument } from '../../src/index.js'
import { FakeMq } from '../fake-mq.js'
import { OtelHarness, useOtelGlobals } from '../otel-harness.js'

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c'
const SPAN_ID = 'b7ad6b7169203331'
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`

describe('the instrumentation seam', () => {
  useOtelGlobals()
  let otel: OtelHarness
  let mq: FakeMq
  let uninstall: () => void

  beforeEach(() => {
    otel = new OtelHarness()
    mq = new FakeMq()
    uninstall = instrument(mq, {
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    })
  })

  afterEach(async () => {
    uninstall()
    await otel.shutdown()
  })

  function process(headers: Headers): void {
    mq.installed
      .processStarted({
        queue: 'orders',
        messageId: 'm-1',
        correlation: 'c-1',
        attempt: 2,
        headers,
      })
      ?.end('acked')
  }

  it('takes the process span parent from the traceparent header, not the active span', () => {
    const ambient = otel.tracer.startSpan('ambient', {}, ROOT_CONTEXT)
    context.with(trace.setSpan(ROOT_CONTEXT, ambient), () =>
      process({ traceparent: TRACEPARENT, tracestate: 'vendor=1' }),
    )
    ambient.end()
    const [span] = otel.spans('orders process')
    expect(span?.spanContext().traceId).toBe(TRACE_ID)
    expect(span?.parentSpanContext?.spanId).toBe(SPAN_ID)
    expect(span?.parentSpanContext?.isRemote).toBe(true)
    expect(span?.spanContext().traceState?.get('vendor')).toBe('1')
  })

  it('starts a new trace for a message without traceparent, even inside an active span', () => {
    const ambient = otel.tracer.startSpan('ambient', {}, ROOT_CONTEXT)
    context.with(trace.setSpan(ROOT_CONTEXT, ambient), () => process({}))
    ambient.end()
    const [span] = otel.spans('orders process')
    expect(span?.parentSpanContext).toBeUndefined()
    expect(span?.spanContext().traceId).not.toBe(ambient.spanContext().traceId)
  })

  it('reads a traceparent that arrives as a Buffer or as bytes', () => {
    process({ traceparent: Buffer.from(TRACEPARENT) })
    process({ traceparent: new TextEncoder().encode(TRACEPARENT) })
    const spans = otel.spans('orders process')
    expect(spans.map((s) => s.parentSpanContext?.spanId)).toEqual([SPAN_ID, SPAN_ID])
  })

  it('ignores a malformed traceparent', () => {
    process({ traceparent: 'not a trace', other: 42 })
    expect(otel.spans('orders process')[0]?.parentSpanContext).toBeUndefined()
  })

  it('makes the process span active only inside run()', () => {
    const scope = mq.installed.processStarted({
      queue: 'orders',
      messageId: 'm-1',
      correlation: 'c-1',
      attempt: 1,
      headers: {},
    })
    const inside = scope?.run(() => trace.getActiveSpan()?.spanContext().spanId)
    expect(trace.getActiveSpan()).toBeUndefined()
    scope?.end('acked')
    expect(inside).toBe(otel.spans('orders process')[0]?.spanContext().spanId)
  })

  it('names a publish to a named exchange after the exchange and writes trace context', () => {
    const headers: Headers = { 'x-tenant': 'acme' }
    const scope = mq.installed.publishStarted({
      exchange: 'orders',
      routingKey: 'order.placed',
      messageId: 'm-1',
      correlation: 'c-1',
      headers,
    })
    scope?.end('confirmed')
    const [span] = otel.spans('orders publish')
    expect(span?.attributes[ACEMQ_ATTRIBUTES.destinationName]).toBe('orders')
    expect(span?.attributes[ACEMQ_ATTRIBUTES.routingKey]).toBe('order.placed')
    expect(headers['traceparent']).toBe(
      `00-${span?.spanContext().traceId}-${span?.spanContext().spanId}-01`,
    )
    expect(headers['x-tenant']).toBe('acme')
  })

  it('continues the caller’s trace when publishing', () => {
    const caller = otel.tracer.startSpan('request', {}, ROOT_CONTEXT)
    context.with(trace.setSpan(ROOT_CONTEXT, caller), () =>
      mq.installed
        .publishStarted({
          exchange: '',
          routingKey: 'q',
          messageId: 'm',
          correlation: 'm',
          headers: {},
        })
        ?.end('confirmed'),
    )
    caller.end()
    expect(otel.spans('q publish')[0]?.parentSpanContext?.spanId).toBe(caller.spanContext().spanId)
  })

  it('marks a failed publish ERROR with the exception and its code', async () => {
    const error = new UnroutableError('orders', 'nowhere')
    mq.installed
      .publishStarted({
        exchange: 'orders',
        routingKey: 'nowhere',
        messageId: 'm',
        correlation: 'm',
        headers: {},
      })
      ?.end('unroutable', error)
    const [span] = otel.spans('orders publish')
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: error.message })
    expect(span?.attributes[ACEMQ_ATTRIBUTES.errorType]).toBe('ACEMQ_UNROUTABLE')
    expect(span?.events[0]?.attributes?.['exception.message']).toBe(error.message)
    expect(
      await otel.sum(ACEMQ_METRICS.publishTotal, {
        exchange: 'orders',
        'routing.key': 'nowhere',
        outcome: 'unroutable',
      }),
    ).toBe(1)
  })

  it('counts the settlement the engine reports, once, however often end is called', async () => {
    const scope = mq.installed.processStarted({
      queue: 'orders',
      messageId: 'm',
      correlation: 'm',
      attempt: 3,
      headers: {},
    })
    scope?.handled(250)
    scope?.setAside('parked', 'orders.parked', 'could not decode: bad json')
    scope?.end('parked')
    scope?.end('acked')
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue: 'orders' })).toBe(1)
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { outcome: 'parked' })).toBe(1)
    expect(
      await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, {
        queue: 'orders',
        outcome: 'parked',
      }),
    ).toBe(1)
    const duration = await otel.histogram(ACEMQ_METRICS.consumeDuration, {
      queue: 'orders',
      outcome: 'parked',
    })
    expect(duration).toEqual({ count: 1, sum: 0.25 })
    expect(otel.spans('orders process')[0]?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'could not decode: bad json',
    })
  })

  it('counts every message that lands in a dead-letter queue, whatever sent it there (issue 35)', async () => {
    for (const outcome of ['rejected', 'refused'] as const) {
      const scope = mq.installed.processStarted({
        queue: 'orders',
        messageId: outcome,
        correlation: outcome,
        attempt: 1,
        headers: {},
      })
      scope?.setAside(outcome, 'orders.dlq', `${outcome}: unknown customer`)
      scope?.end(outcome)
    }
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { outcome: 'rejected' })).toBe(1)
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { outcome: 'refused' })).toBe(1)
    for (const outcome of ['rejected', 'refused']) {
      expect(
        await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, { queue: 'orders', outcome }),
        outcome,
      ).toBe(1)
    }
  })

  it('does not count a message handed back (rejected without a set-aside) as dead-lettered', async () => {
    mq.installed
      .processStarted({
        queue: 'orders',
        messageId: 'm',
        correlation: 'm',
        attempt: 1,
        headers: {},
      })
      ?.end('rejected')
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { outcome: 'rejected' })).toBe(1)
    expect(await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal)).toBe(0)
  })

  it('records an engine failure on the span', () => {
    mq.installed
      .processStarted({
        queue: 'orders',
        messageId: 'm',
        correlation: 'm',
        attempt: 1,
        headers: {},
      })
      ?.end('rejected', new Error('engine defect'))
    const [span] = otel.spans('orders process')
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'engine defect' })
    expect(span?.attributes[ACEMQ_ATTRIBUTES.errorType]).toBe('Error')
  })

  it('counts a missing rung by queue and rung', async () => {
    mq.installed.rungMissing?.('orders', 'orders.retry.30s')
    expect(
      await otel.sum(ACEMQ_METRICS.retryRungMissing, { queue: 'orders', rung: 'orders.retry.30s' }),
    ).toBe(1)
  })

  it('ends spans still open at uninstall but records no more metrics', async () => {
    const scope = mq.installed.processStarted({
      queue: 'orders',
      messageId: 'm',
      correlation: 'm',
      attempt: 1,
      headers: {},
    })
    uninstall()
    expect(mq.instrumentation).toBeUndefined()
    scope?.end('acked')
    expect(otel.spans('orders process')).toHaveLength(1)
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal)).toBe(0)
  })
})
