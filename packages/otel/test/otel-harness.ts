import { afterEach, beforeEach } from 'vitest'
import {
  context,
  metrics,
  propagation,
  trace,
  type Attributes,
  type Tracer,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import {
  DataPointType,
  MeterProvider,
  MetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base'

/** A reader the test collects from when it wants to look. */
class CollectingReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/**
 * Sets the global context manager (AsyncLocalStorage) and the W3C propagator for each test,
 * as a service's OpenTelemetry SDK would, and resets every global afterwards.
 */
export function useOtelGlobals(): void {
  beforeEach(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
    propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  })
  afterEach(() => {
    context.disable()
    propagation.disable()
    trace.disable()
    metrics.disable()
  })
}

/** In-memory span and metric sinks, and the questions the tests ask of them. */
export class OtelHarness {
  readonly exporter = new InMemorySpanExporter()
  readonly tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  })
  readonly reader = new CollectingReader()
  readonly meterProvider = new MeterProvider({ readers: [this.reader] })
  /** A tracer for the test's own spans (callers, handler work). */
  readonly tracer: Tracer = this.tracerProvider.getTracer('test')

  /** Finished spans, optionally only those called `name`, in the order they ended. */
  spans(name?: string): ReadableSpan[] {
    const spans = this.exporter.getFinishedSpans()
    return name === undefined ? spans : spans.filter((span) => span.name === name)
  }

  /** The metric called `name` as collected now, or undefined when it has no data. */
  async metric(name: string): Promise<MetricData | undefined> {
    const { resourceMetrics } = await this.reader.collect()
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name === name) return metric
      }
    }
    return undefined
  }

  /**
   * The sum of a counter's points (or a histogram's counts) whose attributes include all of
   * `labels`; 0 when there are none.
   */
  async sum(name: string, labels: Attributes = {}): Promise<number> {
    const metric = await this.metric(name)
    if (metric === undefined) return 0
    let total = 0
    for (const point of metric.dataPoints) {
      if (!matches(point.attributes, labels)) continue
      const value: unknown = point.value
      if (typeof value === 'number') total += value
      else if (metric.dataPointType === DataPointType.HISTOGRAM)
        total += (value as { count: number }).count
    }
    return total
  }

  /** The histogram point whose attributes include all of `labels`. */
  async histogram(
    name: string,
    labels: Attributes,
  ): Promise<{ readonly count: number; readonly sum: number | undefined } | undefined> {
    const metric = await this.metric(name)
    if (metric?.dataPointType !== DataPointType.HISTOGRAM) return undefined
    const point = metric.dataPoints.find((p) => matches(p.attributes, labels))
    return point && { count: point.value.count, sum: point.value.sum }
  }

  /** The gauge's single value, or undefined when it reported nothing. */
  async gauge(name: string): Promise<number | undefined> {
    const metric = await this.metric(name)
    const value: unknown = metric?.dataPoints[0]?.value
    return typeof value === 'number' ? value : undefined
  }

  async shutdown(): Promise<void> {
    await this.tracerProvider.shutdown()
    await this.meterProvider.shutdown()
  }
}

function matches(attributes: Attributes, labels: Attributes): boolean {
  for (const [key, value] of Object.entries(labels)) {
    if (attributes[key] !== value) return false
  }
  return true
}
