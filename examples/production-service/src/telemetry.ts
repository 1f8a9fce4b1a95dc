import { context, propagation } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'

/** The OpenTelemetry SDK of the service, and how to flush and stop it. */
export interface Telemetry {
  readonly tracerProvider: BasicTracerProvider
  readonly meterProvider: MeterProvider
  /** Flushes what is buffered and stops exporting; the last thing a shutdown does. */
  shutdown(): Promise<{ readonly spanNames: readonly string[]; readonly consumed: string }>
}

/**
 * Starts the SDK before anything else, so everything after it is traced. A real service passes
 * OTLP exporters here (or uses `@opentelemetry/sdk-node`); this one keeps spans and metrics in
 * memory so that the run can say what was exported.
 */
export function startTelemetry(): Telemetry {
  const spans = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spans)],
  })
  const metricsExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const metricReader = new PeriodicExportingMetricReader({
    exporter: metricsExporter,
    exportIntervalMillis: 60_000,
  })
  const meterProvider = new MeterProvider({ readers: [metricReader] })
  // W3C trace context in message headers, and the active span followed across awaits.
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())

  return {
    tracerProvider,
    meterProvider,
    async shutdown() {
      await meterProvider.forceFlush()
      const spanNames = [...new Set(spans.getFinishedSpans().map((span) => span.name))].sort()
      const consumed = consumeOutcomes(metricsExporter)
      await meterProvider.shutdown()
      await tracerProvider.shutdown()
      return { spanNames, consumed }
    },
  }
}

/** `acemq.consume.total` by outcome, as `acked=3 retried=1 ...`. */
function consumeOutcomes(exporter: InMemoryMetricExporter): string {
  const totals = new Map<string, number>()
  for (const resourceMetrics of exporter.getMetrics().slice(-1)) {
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== 'acemq.consume.total') continue
        for (const point of metric.dataPoints) {
          const outcome = String(point.attributes['outcome'])
          totals.set(outcome, (totals.get(outcome) ?? 0) + Number(point.value))
        }
      }
    }
  }
  return [...totals]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([outcome, count]) => `${outcome}=${count}`)
    .join(' ')
}
