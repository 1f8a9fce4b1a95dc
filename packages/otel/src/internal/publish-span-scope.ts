import type { Span } from '@opentelemetry/api'
import type { PublishOutcome, PublishScope } from '@acemq/core/spi'
import { ACEMQ_ATTRIBUTES } from '../names.js'
import { recordError } from './error-details.js'
import type { Instruments, Route } from './instruments.js'
import { reportFailure } from './report-failure.js'

/** One publish: its PRODUCER span and its start time, ended by the publisher. */
export class PublishSpanScope implements PublishScope {
  readonly #instruments: Instruments
  readonly #route: Route
  readonly #span: Span
  readonly #started: number
  #ended = false

  constructor(instruments: Instruments, route: Route, span: Span) {
    this.#instruments = instruments
    this.#route = route
    this.#span = span
    this.#started = performance.now()
  }

  end(outcome: PublishOutcome, error?: unknown): void {
    if (this.#ended) return
    this.#ended = true
    const seconds = (performance.now() - this.#started) / 1000
    try {
      const span = this.#span
      span.setAttribute(ACEMQ_ATTRIBUTES.outcome, outcome)
      if (outcome !== 'confirmed') recordError(span, error ?? outcome)
      span.end()
    } catch (failure) {
      reportFailure('ending a publish span', failure)
    }
    const instruments = this.#instruments
    if (!instruments.recording) return
    try {
      const labels = this.#route.labels[outcome]
      instruments.publishTotal.add(1, labels)
      instruments.publishDuration.record(seconds, labels)
    } catch (failure) {
      reportFailure('counting a publish', failure)
    }
  }
}
