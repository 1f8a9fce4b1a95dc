import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  DiagLogLevel,
  diag,
  metrics,
  propagation,
  trace,
  type DiagLogger,
} from '@opentelemetry/api'
import {
  AceMq,
  ConfigurationError,
  ConsumerOptions,
  InMemoryTransport,
  RetryPolicy,
  Topology,
  type Instrumentation,
} from '@acemq/core'
import { eventually } from '@acemq/testing'
import { ACEMQ_METRICS, instrument, type InstrumentableMq } from '../src/index.js'
import { FakeMq } from './fake-mq.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'
import { otelScenarios } from './otel-scenarios.js'

otelScenarios('the in-memory transport', {
  connect: () => AceMq.connect(new InMemoryTransport()),
  deleteQueues: async () => undefined,
})

describe('instrument()', () => {
  useOtelGlobals()
  let otel: OtelHarness

  beforeEach(() => {
    otel = new OtelHarness()
  })

  afterEach(async () => {
    await otel.shutdown()
  })

  function publishOnce(instrumentation: Instrumentation | undefined): void {
    instrumentation
      ?.publishStarted({
        exchange: '',
        routingKey: 'q',
        messageId: 'm',
        correlation: 'm',
        headers: {},
      })
      ?.end('confirmed')
  }

  it('uses the global tracer and meter providers when none are given', async () => {
    trace.setGlobalTracerProvider(otel.tracerProvider)
    metrics.setGlobalMeterProvider(otel.meterProvider)
    const mq = new FakeMq()
    const uninstall = instrument(mq)
    publishOnce(mq.instrumentation)
    uninstall()
    expect(otel.spans('q publish')).toHaveLength(1)
    expect(await otel.sum(ACEMQ_METRICS.publishTotal)).toBe(1)
  })

  it('replaces an earlier installation on the same connection, whose uninstall then does nothing', async () => {
    const earlier = new OtelHarness()
    const mq = new FakeMq()
    const first = instrument(mq, {
      tracerProvider: earlier.tracerProvider,
      meterProvider: earlier.meterProvider,
    })
    const second = instrument(mq, {
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    })
    first()
    expect(mq.instrumentation).toBeDefined()
    publishOnce(mq.instrumentation)
    expect(otel.spans('q publish')).toHaveLength(1)
    expect(earlier.spans()).toHaveLength(0)
    // The replaced installation no longer reports the gauge either.
    expect(await earlier.gauge(ACEMQ_METRICS.consumeInFlight)).toBeUndefined()
    expect(await otel.gauge(ACEMQ_METRICS.consumeInFlight)).toBe(0)
    second()
    second()
    expect(mq.instrumentation).toBeUndefined()
    await earlier.shutdown()
  })

  it('refuses what is not a connection or a provider, naming the argument', () => {
    expect(() => instrument(undefined as unknown as InstrumentableMq)).toThrow(ConfigurationError)
    expect(() => instrument({} as InstrumentableMq)).toThrow(/instrument\(mq\)/)
    expect(() => instrument(new FakeMq(), { tracerProvider: {} as never })).toThrow(
      /options\.tracerProvider/,
    )
    expect(() => instrument(new FakeMq(), { meterProvider: {} as never })).toThrow(
      /options\.meterProvider/,
    )
    expect(() => instrument(new FakeMq(), null as never)).toThrow(/instrument\(options\)/)
  })

  it('counts a broker wait whose rung queue is missing', async () => {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    const uninstall = instrument(mq, {
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    })
    try {
      const policy = RetryPolicy.fixed(2, 100).waitInBrokerFrom(50)
      await mq.applyTopology(Topology.define().queueWithRetry('orders', policy))
      let calls = 0
      await mq.consume('orders', ConsumerOptions.defaults().withRetry(policy), async () => {
        if (++calls === 1) throw new Error('try again')
      })
      transport.deleteQueue('orders.retry.100ms')
      await mq.publisher('', 'orders').send({})
      await eventually(
        async () =>
          (await otel.sum(ACEMQ_METRICS.consumeTotal, { queue: 'orders', outcome: 'acked' })) === 1,
        10_000,
        'the message to be handled after the move was tried again',
      )
      expect(
        await otel.sum(ACEMQ_METRICS.retryRungMissing, {
          queue: 'orders',
          rung: 'orders.retry.100ms',
        }),
      ).toBe(1)
      // The engine declared the rung again and the held copy went through: one retry.
      expect(await otel.sum(ACEMQ_METRICS.messagesRetriedTotal)).toBe(1)
      expect(transport.hasQueue('orders.retry.100ms')).toBe(true)
    } finally {
      uninstall()
      await mq.close({ drainTimeout: 1_000 })
    }
  })
})

describe('when OpenTelemetry itself fails', () => {
  useOtelGlobals()

  it('a throwing propagator costs the trace link, never the message or its count', async () => {
    const otel = new OtelHarness()
    const failures: unknown[] = []
    diag.setLogger(
      { ...silentLogger, error: (message, ...args) => failures.push(message, ...args) },
      DiagLogLevel.ERROR,
    )
    propagation.disable() // the W3C propagator useOtelGlobals set
    propagation.setGlobalPropagator({
      inject: () => {
        throw new Error('inject broke')
      },
      extract: () => {
        throw new Error('extract broke')
      },
      fields: () => ['traceparent'],
    })
    const mq = await AceMq.connect(new InMemoryTransport())
    const uninstall = instrument(mq, {
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    })
    try {
      await mq.applyTopology(Topology.define().queue('orders'))
      let handled = 0
      await mq.consume('orders', ConsumerOptions.defaults(), async () => {
        handled++
      })
      await mq.publisher('', 'orders').send({})
      await eventually(
        async () => (await otel.sum(ACEMQ_METRICS.consumeTotal, { outcome: 'acked' })) === 1,
        5_000,
        'the acked count',
      )
      expect(handled).toBe(1)
      expect(await otel.sum(ACEMQ_METRICS.publishTotal, { outcome: 'confirmed' })).toBe(1)
      expect(otel.spans('orders process')[0]?.parentSpanContext).toBeUndefined()
      expect(failures.some((f) => f instanceof Error && f.message === 'inject broke')).toBe(true)
      expect(failures.some((f) => f instanceof Error && f.message === 'extract broke')).toBe(true)
    } finally {
      diag.disable()
      uninstall()
      await mq.close({ drainTimeout: 1_000 })
      await otel.shutdown()
    }
  })
})

const silentLogger: DiagLogger = {
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  verbose: () => undefined,
}
