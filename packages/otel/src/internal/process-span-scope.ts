import { SpanStatusCode, context, type Context, type Span } from '@opentelemetry/api'
import type { ConsumeOutcome, ProcessScope } from '@acemq/core/spi'
import { ACEMQ_ATTRIBUTES, ACEMQ_EVENTS } from '../names.js'
import { recordError } from './error-details.js'
import type { Instruments, QueueRecord } from './instruments.js'
import { reportFailure } from './report-failure.js'

/**
 * One delivery: its CONSUMER span, the context the handler runs in, and what it learns
 * before the engine settles the delivery. Metrics are recorded once, at `end`, from the
 * settlement the engine reports.
 */
export class ProcessSpanScope implements ProcessScope {
  readonly #instruments: Instruments
  readonly #queue: QueueRecord
  readonly #span: Span
  readonly #context: Context
  /** Handler time in seconds, or -1 when the handler never ran (duplicate, in progress, undecodable). */
  #handlerSeconds = -1
  /** Why the message was set aside, for the span status. */
  #reason: string | undefined
  /** How it landed in `.dlq` or `.parked`, when it did: counted at `end`, whatever the end says. */
  #setAside: 'dead_lettered' | 'parked' | 'rejected' | 'refused' | 'invalid' | undefined
  #ended = false

  constructor(instruments: Instruments, queue: QueueRecord, span: Span, spanContext: Context) {
    this.#instruments = instruments
    this.#queue = queue
    this.#span = span
    this.#context = spanContext
  }

  run<T>(fn: () => T): T {
    return context.with(this.#context, fn)
  }

  handled(durationMs: number): void {
    this.#handlerSeconds = durationMs / 1000
  }

  retried(delayMs: number, inBroker: boolean): void {
    try {
      this.#span.addEvent(ACEMQ_EVENTS.retried, {
        [ACEMQ_ATTRIBUTES.retryDelayMs]: delayMs,
        [ACEMQ_ATTRIBUTES.inBroker]: inBroker,
      })
    } catch (error) {
      reportFailure('recording a retry', error)
    }
  }

  setAside(
    outcome: 'dead_lettered' | 'parked' | 'rejected' | 'refused' | 'invalid',
    queue: string,
    reason: string,
  ): void {
    this.#reason = reason
    this.#setAside = outcome
    try {
      this.#span.addEvent(ACEMQ_EVENTS.deadLettered, {
        [ACEMQ_ATTRIBUTES.outcome]: outcome,
        [ACEMQ_ATTRIBUTES.targetQueue]: queue,
        [ACEMQ_ATTRIBUTES.reason]: reason,
      })
    } catch (error) {
      reportFailure('recording a set-aside', error)
    }
  }

  end(outcome: ConsumeOutcome, error?: unknown): void {
    if (this.#ended) return
    this.#ended = true
    try {
      this.#endSpan(outcome, error)
    } catch (failure) {
      reportFailure('ending a process span', failure)
    }
    if (!this.#instruments.recording) return
    try {
      this.#count(outcome)
    } catch (failure) {
      reportFailure('counting a delivery', failure)
    }
  }

  #endSpan(outcome: ConsumeOutcome, error: unknown): void {
    const span = this.#span
    span.setAttribute(ACEMQ_ATTRIBUTES.outcome, outcome)
    if (error !== undefined) {
      recordError(span, error)
    } else if (outcome !== 'acked' && outcome !== 'in_progress') {
      // The handler failed or gave the message up: show it, with the reason when known.
      span.setStatus({ code: SpanStatusCode.ERROR, message: this.#reason ?? outcome })
    }
    span.end()
  }

  #count(outcome: ConsumeOutcome): void {
    const instruments = this.#instruments
    const record = this.#queue
    const labels = record.labels[outcome]
    instruments.consumeTotal.add(1, labels)
    if (this.#handlerSeconds >= 0) instruments.consumeDuration.record(this.#handlerSeconds, labels)
    if (outcome === 'retried') instruments.retriedTotal.add(1, record.retriedLabels)
    // Every message that landed in a dead-letter or parking queue, whatever sent it there
    // (retries ran out, FatalError, a refusal, a park): an alert on this metric hears them all.
    const landed = this.#setAside
    if (landed !== undefined)
      instruments.deadLetteredTotal.add(1, record.deadLetteredLabels[landed])
  }
}
