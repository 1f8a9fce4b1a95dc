import type { Headers } from '../transport/transport.js'

/** How a publish ended. */
export type PublishOutcome = 'confirmed' | 'unroutable' | 'failed' | 'refused'

/** How a delivery was settled: what happened, not what the handler asked for. */
export type ConsumeOutcome =
  | 'acked'
  | 'retried'
  | 'rejected'
  | 'dead_lettered'
  | 'parked'
  | 'in_progress'
  /** A message an interceptor refused, moved to `{queue}.dlq` without retry. */
  | 'refused'
  /** A payload its schema refused, moved to `{queue}.dlq` without retry (`withSchema`). */
  | 'invalid'

/** What a publish is about to do. `headers` may be written to (trace context injection). */
export interface PublishInfo {
  readonly exchange: string
  readonly routingKey: string
  readonly messageId: string
  readonly correlation: string
  readonly headers: Headers
}

/** One publish being observed. */
export interface PublishScope {
  end(outcome: PublishOutcome, error?: unknown): void
}

/** A delivery about to be processed. `headers` are the application headers (with `traceparent`). */
export interface ProcessInfo {
  readonly queue: string
  readonly messageId: string
  readonly correlation: string
  readonly attempt: number
  readonly headers: Readonly<Headers>
}

/** One delivery being observed, from decode to settlement. */
export interface ProcessScope {
  /** Runs the handler (or anything it publishes) inside this scope's context. */
  run<T>(fn: () => T): T
  /** The handler returned, or threw `error`, after `durationMs`. */
  handled(durationMs: number, error?: unknown): void
  /** The message was put back for another attempt after `delayMs`. */
  retried(delayMs: number, inBroker: boolean): void
  /** The message landed on `queue` (`{q}.dlq`, `{q}.parked`) with `reason`, however it got there. */
  setAside(
    outcome: 'dead_lettered' | 'parked' | 'rejected' | 'refused' | 'invalid',
    queue: string,
    reason: string,
  ): void
  /** The delivery is settled. Called exactly once. */
  end(outcome: ConsumeOutcome, error?: unknown): void
}

/**
 * The instrumentation seam: core calls it, `@acemq/otel` implements it. With nothing
 * installed the engine pays one null check per message.
 *
 * @example
 * ```ts
 * mq.setInstrumentation({ publishStarted: () => undefined, processStarted: () => undefined })
 * ```
 */
export interface Instrumentation {
  publishStarted(info: PublishInfo): PublishScope | undefined
  processStarted(info: ProcessInfo): ProcessScope | undefined
  /** A broker wait named a rung queue that is not there; the message was put back instead. */
  rungMissing?(queue: string, rung: string): void
  /** The outbox relay published a record (confirmed), or its publish failed. */
  outboxRelayed?(info: OutboxRelayInfo): void
  /** An interceptor threw where a throw changes nothing (after the handler, on error, after a confirm). */
  interceptorFailed?(info: InterceptorFailureInfo): void
  /** A pipeline run finished: its last step returned, or a step ended it early. */
  pipelineRunFinished?(info: PipelineRunInfo): void
  /** A request or its reply was settled, on the requester's or the responder's side. */
  requestSettled?(info: RequestSettledInfo): void
  /** A delayed message was scheduled, delivered when due, or failed to route when due. */
  scheduleEvent?(info: ScheduleEventInfo): void
}

/**
 * One request/reply outcome. Requester: `answered` (a reply resolved the caller),
 * `timed_out`, `unmatched` (a reply nobody waits for: late, duplicate or for a requester that
 * restarted; dropped), `failed` (an error reply, unroutable, aborted, connection lost or
 * closed). Responder: `answered` (the reply was confirmed), `unanswerable` (no reply address,
 * a reply the codec refuses, or a reply address that no longer routes).
 */
export interface RequestSettledInfo {
  readonly role: 'requester' | 'responder'
  /** The requester's `exchange/routingKey`, or the responder's queue. */
  readonly destination: string
  readonly outcome: 'answered' | 'timed_out' | 'unmatched' | 'failed' | 'unanswerable'
  /** Requester `answered`: milliseconds from the publish to the reply. */
  readonly durationMs?: number
}

/**
 * One scheduler event: `scheduled` (published onto the ladder), `delivered` (published,
 * confirmed, to its destination when due), `failed` (its destination did not route; it is
 * tried again in 5 s).
 */
export interface ScheduleEventInfo {
  readonly exchange: string
  readonly routingKey: string
  readonly outcome: 'scheduled' | 'delivered' | 'failed'
  /** `delivered`: milliseconds past its due time (the ladder's lateness). */
  readonly lateMs?: number
}

/** An interceptor that threw (`acemq.interceptor.failed`). */
export interface InterceptorFailureInfo {
  /** Its `name`, or `interceptor`. */
  readonly interceptor: string
  /** Where it threw: `afterHandle`, `onError`, `afterConfirm`, `onPublishError`. */
  readonly phase: string
  /** The consumer's queue, or the publish's exchange and routing key. */
  readonly queue: string
}

/** One pipeline run that finished, counted when the delivery that finished it was acked. */
export interface PipelineRunInfo {
  readonly pipeline: string
  /** The run's id (`x-acemq-route-id`): for logs, never a metric label. */
  readonly runId: string
  /** The step it finished at. */
  readonly step: string
  /** `completed`: the route's last step returned; `ended_early`: a step before it returned null. */
  readonly outcome: 'completed' | 'ended_early'
  /** The run's age at the end: milliseconds since its first publish (`x-acemq-first-seen`). */
  readonly durationMs: number
}

/** One record the outbox relay handled. */
export interface OutboxRelayInfo {
  readonly exchange: string
  readonly routingKey: string
  /** `published`: the broker confirmed it; `failed`: the publish failed and was counted. */
  readonly outcome: 'published' | 'failed'
  /** Milliseconds from the record's creation to this outcome. */
  readonly lagMs: number
}
