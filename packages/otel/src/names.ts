/**
 * The names `@acemq/otel` emits: metric names and units shared by the AceMQ family
 * (docs/design.md §11), span attribute keys and span event names. Use them in dashboards, alerts and tests
 * instead of retyping the strings.
 *
 * @example
 * ```ts
 * import { ACEMQ_METRICS } from '@acemq/otel'
 * const total = findMetric(collected, ACEMQ_METRICS.consumeTotal)
 * ```
 */
export const ACEMQ_METRICS = Object.freeze({
  /** Counter of publishes, by `exchange`, `routing.key`, `outcome`. */
  publishTotal: 'acemq.publish.total',
  /** Histogram (s) of publish time until the broker confirmed or refused, same labels. */
  publishDuration: 'acemq.publish.duration',
  /** Counter of settled deliveries, by `queue`, `outcome`. */
  consumeTotal: 'acemq.consume.total',
  /** Histogram (s) of handler time only, by `queue`, `outcome`. */
  consumeDuration: 'acemq.consume.duration',
  /** Gauge of handlers running now (`mq.inFlight`). */
  consumeInFlight: 'acemq.consume.in.flight',
  /** Counter of messages put back for another attempt, by `queue`. */
  messagesRetriedTotal: 'acemq.messages.retried.total',
  /** Counter of messages that landed in `.dlq` or `.parked`, by `queue`, `outcome` (`dead_lettered`, `rejected`, `refused`, `parked`). */
  messagesDeadLetteredTotal: 'acemq.messages.dead.lettered.total',
  /** Counter of broker waits whose rung queue was missing, by `queue`, `rung`. */
  retryRungMissing: 'acemq.retry.rung.missing',
  /** Counter of outbox records the relay handled, by `exchange`, `routing.key`, `outcome` (published|failed). */
  outboxTotal: 'acemq.outbox.total',
  /** Histogram (s) of outbox lag: from a record's creation to its publish (or failure), same labels. */
  outboxLag: 'acemq.outbox.lag',
  /** Gauge of the partitions of an ordered queue halted now, by `queue` (the ordered queue's name). */
  orderedPartitionsHalted: 'acemq.ordered.partitions.halted',
  /** Counter of finished pipeline runs, by `pipeline`, `step` (where it finished), `outcome` (completed|ended_early). */
  pipelineRunTotal: 'acemq.pipeline.run.total',
  /** Histogram (s) of a finished run's age (from its first publish to its end), same labels. */
  pipelineRunDuration: 'acemq.pipeline.run.duration',
  /** Counter of interceptors that threw after the handler, on error or around a publish, by `queue`, `interceptor`, `phase`. */
  interceptorFailed: 'acemq.interceptor.failed',
  /**
   * Counter of settled requests, by `role` (requester|responder), `destination`, `outcome`
   * (answered|timed_out|unmatched|failed|unanswerable).
   */
  requestTotal: 'acemq.request.total',
  /** Counter of scheduler events, by `exchange`, `routing.key`, `outcome` (scheduled|delivered|failed). */
  scheduleTotal: 'acemq.schedule.total',
} as const)

/**
 * Metric label keys (docs/design.md §11).
 *
 * @example
 * ```ts
 * const dlq = point.attributes[ACEMQ_LABELS.outcome] === 'dead_lettered'
 * ```
 */
export const ACEMQ_LABELS = Object.freeze({
  exchange: 'exchange',
  routingKey: 'routing.key',
  queue: 'queue',
  outcome: 'outcome',
  rung: 'rung',
  pipeline: 'pipeline',
  step: 'step',
  interceptor: 'interceptor',
  phase: 'phase',
  role: 'role',
  destination: 'destination',
} as const)

/**
 * Span attribute keys: the OpenTelemetry messaging conventions plus `messaging.acemq.*`.
 *
 * @example
 * ```ts
 * span.attributes[ACEMQ_ATTRIBUTES.outcome] // 'acked'
 * ```
 */
export const ACEMQ_ATTRIBUTES = Object.freeze({
  /** Always `rabbitmq`. */
  system: 'messaging.system',
  /** The exchange (publish; the routing key for the default exchange) or the queue (process). */
  destinationName: 'messaging.destination.name',
  /** The routing key of a publish. */
  routingKey: 'messaging.rabbitmq.destination.routing_key',
  /** `publish` or `process`. */
  operationType: 'messaging.operation.type',
  /** `publish` or `process`. */
  operationName: 'messaging.operation.name',
  /** The envelope id (`x-acemq-id`). */
  messageId: 'messaging.message.id',
  /** The envelope correlation (`x-acemq-correlation`). */
  conversationId: 'messaging.message.conversation_id',
  /** The delivery attempt, from 1 (process spans). */
  attempt: 'messaging.acemq.attempt',
  /** How the publish or the delivery ended, set when the span ends. */
  outcome: 'messaging.acemq.outcome',
  /** On `message.retried`: the wait before the next attempt, in milliseconds. */
  retryDelayMs: 'messaging.acemq.retry_delay_ms',
  /** On `message.retried`: whether the wait is spent in a broker rung queue. */
  inBroker: 'messaging.acemq.in_broker',
  /** On `message.dead_lettered`: why the message was set aside. */
  reason: 'messaging.acemq.reason',
  /** On `message.dead_lettered`: the queue it was moved to (`{q}.dlq`, `{q}.parked`). */
  targetQueue: 'messaging.acemq.target_queue',
  /** On a failed span: the error's stable code (`ACEMQ_UNROUTABLE`) or its class name. */
  errorType: 'error.type',
} as const)

/**
 * Span event names.
 *
 * @example
 * ```ts
 * span.events.filter((e) => e.name === ACEMQ_EVENTS.retried)
 * ```
 */
export const ACEMQ_EVENTS = Object.freeze({
  /** The message was put back for another attempt. */
  retried: 'message.retried',
  /** The message was moved to its `.dlq` or `.parked` queue. */
  deadLettered: 'message.dead_lettered',
} as const)

/**
 * The instrumentation scope name of the tracer and meter.
 *
 * @example
 * ```ts
 * spans.filter((s) => s.instrumentationScope.name === INSTRUMENTATION_SCOPE)
 * ```
 */
export const INSTRUMENTATION_SCOPE = '@acemq/otel'
