import { context, metrics, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'
import amqplib from 'amqplib'
import {
  ConsumerOptions,
  RetryPolicy,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
} from '@acemq/core'
import { instrument } from '@acemq/otel'
import { connect } from '@acemq/transport-amqp'

// The OpenTelemetry SDK, set up once at start-up (@opentelemetry/sdk-node does all of this for
// you): spans and metrics printed to the console, W3C trace context, async context tracking.
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
})
const metricReader = new PeriodicExportingMetricReader({
  exporter: new ConsoleMetricExporter(),
  exportIntervalMillis: 60_000,
})
const meterProvider = new MeterProvider({ readers: [metricReader] })
trace.setGlobalTracerProvider(tracerProvider)
metrics.setGlobalMeterProvider(meterProvider)
propagation.setGlobalPropagator(new W3CTraceContextPropagator())
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const queue = process.env.QUEUE ?? 'examples.otel-console'
const policy = RetryPolicy.exponential(3, '100ms')

const mq = await connect(url)
instrument(mq) // ← the one line: every publish, delivery, retry and move is traced and metered

await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
let finish!: () => void
const done = new Promise<void>((resolve) => (finish = resolve))
await mq.consume<{ id: string }>(queue, ConsumerOptions.defaults().withRetry(policy), (message) => {
  if (message.envelope.attempt === 1) throw new Error('the first attempt fails, to show a retry')
  finish()
})
console.log(`--- publishing order-1 to ${queue}: one trace, from the publish through the retry`)
await mq.publisher<{ id: string }>('', queue).send({ id: 'order-1' })
await done
await mq.close()

console.log('--- the acemq.* metrics')
await meterProvider.shutdown() // exports once more, then stops
await tracerProvider.shutdown()

// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its queues.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
for (const name of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
  await channel.deleteQueue(name)
}
await admin.close()
console.log(`--- removed ${queue} and its .dlq and .parked`)
