import type {
  Attributes,
  Counter,
  Histogram,
  Meter,
  ObservableGauge,
  Tracer,
} from '@opentelemetry/api'
import type { ConsumeOutcome, PublishOutcome } from '@acemq/core/spi'
import { ACEMQ_LABELS, ACEMQ_METRICS } from '../names.js'

/**
 * Bucket boundaries for durations in seconds (the OpenTelemetry recommendation for
 * request-like durations); the SDK's defaults are sized for milliseconds.
 */
const DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60,
]

/**
 * How many distinct publish routes (exchange, routing key) and queues keep cached span
 * names and label sets. Beyond it each message builds its own: still correct, just not free.
 * A service with more routes than this has a metric cardinality problem anyway.
 */
const MAX_CACHED = 1_000

const PUBLISH_OUTCOMES: readonly PublishOutcome[] = ['confirmed', 'unroutable', 'failed', 'refused']
const CONSUME_OUTCOMES: readonly ConsumeOutcome[] = [
  'acked',
  'retried',
  'rejected',
  'dead_lettered',
  'parked',
  'in_progress',
  'refused',
  'invalid',
]

/** What a publish to one exchange and routing key needs, built once per route. */
export interface Route {
  readonly spanName: string
  readonly destination: string
  /** Metric labels by outcome. */
  readonly labels: Readonly<Record<PublishOutcome, Attributes>>
}

/** What a delivery from one queue needs, built once per queue. */
export interface QueueRecord {
  readonly spanName: string
  /** `acemq.consume.*` labels by outcome. */
  readonly labels: Readonly<Record<ConsumeOutcome, Attributes>>
  /** `acemq.messages.retried.total` labels. */
  readonly retriedLabels: Attributes
  /** `acemq.messages.dead.lettered.total` labels by outcome. */
  readonly deadLetteredLabels: Readonly<
    Record<'dead_lettered' | 'parked' | 'rejected' | 'refused' | 'invalid', Attributes>
  >
}

/** A counter's or gauge's unit and description. */
type Described = readonly [unit: string, description: string]

/** The counters and gauges, by their key in {@link ACEMQ_METRICS}. */
const DESCRIBED = {
  publishTotal: ['{message}', 'Messages published, by how the publish ended.'],
  consumeTotal: ['{message}', 'Deliveries settled, by what actually happened to them.'],
  messagesRetriedTotal: ['{message}', 'Messages put back for another attempt.'],
  messagesDeadLetteredTotal: [
    '{message}',
    'Messages that landed in a dead-letter or parking queue, by how: dead_lettered (retries ran out), rejected (FatalError, Ack.deadLetter), refused (an interceptor), parked.',
  ],
  retryRungMissing: [
    '{message}',
    'Broker waits whose rung queue was missing; the message was put back instead.',
  ],
  outboxTotal: ['{record}', 'Outbox records the relay handled: published (confirmed) or failed.'],
  pipelineRunTotal: [
    '{run}',
    'Pipeline runs finished: completed by the last step, or ended early by a step.',
  ],
  interceptorFailed: [
    '{failure}',
    'Interceptors that threw where a throw changes nothing (after the handler, on error, after a confirm).',
  ],
  requestTotal: ['{request}', 'Requests settled, by the requester or the responder, and how.'],
  scheduleTotal: [
    '{message}',
    'Delayed messages scheduled, delivered when due, or failing to route.',
  ],
  consumeInFlight: ['{message}', 'Handlers running now, counted until their settlement is done.'],
  orderedPartitionsHalted: [
    '{partition}',
    'Partitions of an ordered queue halted on a message until resumed.',
  ],
} as const satisfies Partial<Record<keyof typeof ACEMQ_METRICS, Described>>

/**
 * The histograms, in seconds, by their key in {@link ACEMQ_METRICS}: the description, and
 * whether they use {@link DURATION_BUCKETS} (else the SDK's boundaries).
 */
const HISTOGRAMS = {
  publishDuration: ['Time from send until the broker confirmed or the publish failed.', true],
  consumeDuration: ['Handler time only (no decode, claim, wait or settlement).', true],
  outboxLag: ['Time from an outbox record being written to its publish (or failure).', false],
  pipelineRunDuration: [
    "A finished pipeline run's age: from its first publish to the step that ended it.",
    true,
  ],
} as const satisfies Partial<
  Record<keyof typeof ACEMQ_METRICS, readonly [description: string, bucketed: boolean]>
>

/**
 * The tracer, the metric instruments (created once per `instrument()` call) and the cached
 * span names and label sets the hot path reuses.
 */
export class Instruments {
  readonly tracer: Tracer
  readonly publishTotal: Counter
  readonly publishDuration: Histogram
  readonly consumeTotal: Counter
  readonly consumeDuration: Histogram
  readonly consumeInFlight: ObservableGauge
  readonly orderedPartitionsHalted: ObservableGauge
  readonly retriedTotal: Counter
  readonly deadLetteredTotal: Counter
  readonly rungMissing: Counter
  readonly outboxTotal: Counter
  readonly outboxLag: Histogram
  readonly pipelineRunTotal: Counter
  readonly pipelineRunDuration: Histogram
  readonly interceptorFailed: Counter
  readonly requestTotal: Counter
  readonly scheduleTotal: Counter
  /** Cleared by uninstall: scopes still open end their spans but record no more metrics. */
  recording = true
  readonly #routes = new Map<string, Map<string, Route>>()
  readonly #queues = new Map<string, QueueRecord>()
  #cachedRoutes = 0

  constructor(tracer: Tracer, meter: Meter) {
    this.tracer = tracer
    const counter = (key: keyof typeof DESCRIBED): Counter => {
      const [unit, description] = DESCRIBED[key]
      return meter.createCounter(ACEMQ_METRICS[key], { description, unit })
    }
    const gauge = (key: keyof typeof DESCRIBED): ObservableGauge => {
      const [unit, description] = DESCRIBED[key]
      return meter.createObservableGauge(ACEMQ_METRICS[key], { description, unit })
    }
    const seconds = (key: keyof typeof HISTOGRAMS): Histogram => {
      const [description, bucketed] = HISTOGRAMS[key]
      return meter.createHistogram(
        ACEMQ_METRICS[key],
        bucketed
          ? { description, unit: 's', advice: { explicitBucketBoundaries: DURATION_BUCKETS } }
          : { description, unit: 's' },
      )
    }
    this.publishTotal = counter('publishTotal')
    this.publishDuration = seconds('publishDuration')
    this.consumeTotal = counter('consumeTotal')
    this.consumeDuration = seconds('consumeDuration')
    this.consumeInFlight = gauge('consumeInFlight')
    this.orderedPartitionsHalted = gauge('orderedPartitionsHalted')
    this.retriedTotal = counter('messagesRetriedTotal')
    this.deadLetteredTotal = counter('messagesDeadLetteredTotal')
    this.rungMissing = counter('retryRungMissing')
    this.outboxTotal = counter('outboxTotal')
    this.outboxLag = seconds('outboxLag')
    this.pipelineRunTotal = counter('pipelineRunTotal')
    this.pipelineRunDuration = seconds('pipelineRunDuration')
    this.interceptorFailed = counter('interceptorFailed')
    this.requestTotal = counter('requestTotal')
    this.scheduleTotal = counter('scheduleTotal')
  }

  /** The cached record of a publish route. */
  route(exchange: string, routingKey: string): Route {
    let byKey = this.#routes.get(exchange)
    let route = byKey?.get(routingKey)
    if (route !== undefined) return route
    route = buildRoute(exchange, routingKey)
    if (this.#cachedRoutes < MAX_CACHED) {
      if (byKey === undefined) {
        byKey = new Map()
        this.#routes.set(exchange, byKey)
      }
      byKey.set(routingKey, route)
      this.#cachedRoutes++
    }
    return route
  }

  /** The cached record of a consumed queue. */
  queue(name: string): QueueRecord {
    let record = this.#queues.get(name)
    if (record !== undefined) return record
    record = buildQueueRecord(name)
    if (this.#queues.size < MAX_CACHED) this.#queues.set(name, record)
    return record
  }
}

function buildRoute(exchange: string, routingKey: string): Route {
  // The default exchange routes to the queue named by the routing key: that queue is
  // where the message goes, and an empty span name says nothing.
  const destination = exchange === '' ? routingKey : exchange
  const labels = {} as Record<PublishOutcome, Attributes>
  for (const outcome of PUBLISH_OUTCOMES) {
    labels[outcome] = Object.freeze({
      [ACEMQ_LABELS.exchange]: exchange,
      [ACEMQ_LABELS.routingKey]: routingKey,
      [ACEMQ_LABELS.outcome]: outcome,
    })
  }
  return Object.freeze({
    spanName: `${destination} publish`,
    destination,
    labels: Object.freeze(labels),
  })
}

function buildQueueRecord(queue: string): QueueRecord {
  const labels = {} as Record<ConsumeOutcome, Attributes>
  for (const outcome of CONSUME_OUTCOMES) {
    labels[outcome] = Object.freeze({
      [ACEMQ_LABELS.queue]: queue,
      [ACEMQ_LABELS.outcome]: outcome,
    })
  }
  return Object.freeze({
    spanName: `${queue} process`,
    labels: Object.freeze(labels),
    retriedLabels: Object.freeze({ [ACEMQ_LABELS.queue]: queue }),
    deadLetteredLabels: Object.freeze({
      dead_lettered: Object.freeze({
        [ACEMQ_LABELS.queue]: queue,
        [ACEMQ_LABELS.outcome]: 'dead_lettered',
      }),
      parked: Object.freeze({ [ACEMQ_LABELS.queue]: queue, [ACEMQ_LABELS.outcome]: 'parked' }),
      rejected: Object.freeze({ [ACEMQ_LABELS.queue]: queue, [ACEMQ_LABELS.outcome]: 'rejected' }),
      refused: Object.freeze({ [ACEMQ_LABELS.queue]: queue, [ACEMQ_LABELS.outcome]: 'refused' }),
      invalid: Object.freeze({ [ACEMQ_LABELS.queue]: queue, [ACEMQ_LABELS.outcome]: 'invalid' }),
    }),
  })
}
