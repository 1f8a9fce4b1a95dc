import {
  metrics,
  trace,
  type MeterProvider,
  type ObservableResult,
  type TracerProvider,
} from '@opentelemetry/api'
import { ConfigurationError, type Instrumentation } from '@acemq/core'
import { ACEMQ_LABELS, INSTRUMENTATION_SCOPE } from './names.js'
import { Instruments } from './internal/instruments.js'
import { OtelInstrumentation } from './internal/otel-instrumentation.js'

/**
 * Options of {@link instrument}.
 *
 * @example
 * ```ts
 * const options: InstrumentOptions = { tracerProvider: sdk.tracerProvider }
 * ```
 */
export interface InstrumentOptions {
  /** Where spans go (default: the global provider, `trace.getTracerProvider()`). */
  readonly tracerProvider?: TracerProvider
  /** Where metrics go (default: the global provider, `metrics.getMeterProvider()`). */
  readonly meterProvider?: MeterProvider
}

/**
 * What {@link instrument} needs from a connection: the telemetry seam and the in-flight
 * count. An `AceMq` is one.
 *
 * @example
 * ```ts
 * const target: InstrumentableMq = await AceMq.connect(new InMemoryTransport())
 * ```
 */
export interface InstrumentableMq {
  setInstrumentation(instrumentation: Instrumentation | undefined): void
  readonly inFlight: number
  /** The connection's ordered queues, for the halted-partitions gauge (an `AceMq` has them). */
  readonly orderedQueues?: readonly {
    readonly name: string
    readonly haltedPartitions: readonly number[]
  }[]
}

/**
 * The uninstall function of what each connection has installed through {@link instrument}:
 * a second `instrument` retires the first, and a stale uninstall leaves the newer one alone.
 */
const installed = new WeakMap<InstrumentableMq, () => void>()

/**
 * Traces and meters `mq` through OpenTelemetry: a PRODUCER span per publish (which puts
 * `traceparent`/`tracestate` on the message), a CONSUMER span per delivery (whose parent is
 * the message's `traceparent`, active while the handler runs), and the `acemq.*` metrics.
 * Uses the global tracer and meter providers unless given others. Returns a function that
 * uninstalls it; calling `instrument` again on the same connection replaces the previous one.
 *
 * @example
 * ```ts
 * import { instrument } from '@acemq/otel'
 * const uninstall = instrument(mq) // after the OpenTelemetry SDK has started
 * ```
 */
export function instrument(mq: InstrumentableMq, options: InstrumentOptions = {}): () => void {
  if (typeof mq !== 'object' || mq === null || typeof mq.setInstrumentation !== 'function') {
    throw new ConfigurationError(
      `instrument(mq) needs an AceMq connection; got ${String(mq as unknown)}`,
    )
  }
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(
      `instrument(options) must be an object; got ${String(options as unknown)}`,
    )
  }
  const { tracerProvider, meterProvider } = options
  if (tracerProvider !== undefined && typeof tracerProvider.getTracer !== 'function') {
    throw new ConfigurationError(
      'instrument(options.tracerProvider) must be an OpenTelemetry TracerProvider (with getTracer)',
    )
  }
  if (meterProvider !== undefined && typeof meterProvider.getMeter !== 'function') {
    throw new ConfigurationError(
      'instrument(options.meterProvider) must be an OpenTelemetry MeterProvider (with getMeter)',
    )
  }

  installed.get(mq)?.()
  const tracer = (tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_SCOPE)
  const meter = (meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE)
  const instruments = new Instruments(tracer, meter)
  const observeInFlight = (result: ObservableResult): void => result.observe(mq.inFlight)
  instruments.consumeInFlight.addCallback(observeInFlight)
  const observeHalted = (result: ObservableResult): void => {
    for (const queue of mq.orderedQueues ?? []) {
      result.observe(queue.haltedPartitions.length, { [ACEMQ_LABELS.queue]: queue.name })
    }
  }
  instruments.orderedPartitionsHalted.addCallback(observeHalted)

  const uninstall = (): void => {
    if (!instruments.recording) return
    instruments.recording = false
    instruments.consumeInFlight.removeCallback(observeInFlight)
    instruments.orderedPartitionsHalted.removeCallback(observeHalted)
    if (installed.get(mq) === uninstall) {
      installed.delete(mq)
      mq.setInstrumentation(undefined)
    }
  }
  mq.setInstrumentation(new OtelInstrumentation(instruments))
  installed.set(mq, uninstall)
  return uninstall
}
