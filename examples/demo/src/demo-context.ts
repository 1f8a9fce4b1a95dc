import type { AceMq, RetryPolicy } from '@acemq/core'
import type { Narrator } from './narrator.js'
import type { QueueView } from './queue-view.js'
import type { Store } from './setup.js'

/** An order, the payload of every message in the demo. */
export interface Order {
  readonly id: string
  readonly sku?: string
}

/** What every scenario gets. */
export interface DemoContext {
  readonly mq: AceMq
  /** The consumers' idempotency store (SQLite or Postgres). */
  readonly store: Store
  /** The same store as seen by another worker, with claims of its own. */
  readonly otherWorker: Store
  readonly narrator: Narrator
  readonly queues: QueueView
  /** Prints the scenario's heading. */
  section(title: string, queue?: string): void
  /**
   * Declares the demo queue `name` as an application would at start-up: the queue, its
   * `.dlq` and `.parked` queues, and the rung queues of `policy`. Answers the full name.
   */
  queue(name: string, policy?: RetryPolicy): Promise<string>
  /** The full name of the demo's queue (or pipeline) `name`, without declaring anything. */
  named(name: string): string
  /** Queues a scenario declared itself (a pipeline's steps): deleted with the others at the end. */
  declared(queues: readonly string[]): void
}

/** One row of the summary table. */
export interface SummaryRow {
  readonly scenario: string
  readonly queue: string
  readonly outcome: string
  readonly detail: string
}

/** Resolves once `condition()` holds; fails loudly rather than hang the demo. */
export async function waitUntil(
  condition: () => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`the demo waited ${timeoutMs} ms for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
