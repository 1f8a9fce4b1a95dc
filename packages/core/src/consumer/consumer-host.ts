import type { AsyncLocalStorage } from 'node:async_hooks'
import type { CodecRegistry } from '../codec/codec-registry.js'
import type { Instrumentation } from '../telemetry/instrumentation.js'
import type { Transport } from '../transport/transport.js'
import type { ConsumerEngine } from './consumer-engine.js'
import type { DeadLetterReport } from './dead-letter.js'
import type { DeliveryTask } from './delivery-task.js'
import type { ConsumeInterceptor } from './interceptor.js'

/** What a consumer needs from its connection. Internal to core. */
export interface ConsumerHost {
  readonly transport: Transport
  readonly codecs: CodecRegistry
  readonly origin: string
  readonly instrumentation: Instrumentation | undefined
  /** The connection's interceptors by order (`mq.intercept`): a new array at each change. */
  readonly interceptors: readonly ConsumeInterceptor[]
  readonly consumingPaused: boolean
  readonly currentTask: AsyncLocalStorage<DeliveryTask | undefined>
  /** Aborted when the connection is about to close: set-aside publishes stop waiting then. */
  readonly closingSignal: AbortSignal
  /** Handlers (and their settlement) running across the connection went up or down by one. */
  inFlightChanged(delta: 1 | -1): void
  consumerClosed(consumer: ConsumerEngine<unknown>): void
  /** The connection's `onDeadLetter` (its default reports through {@link reportError}). */
  deadLettered(report: DeadLetterReport): void
  /** Reports a failure the engine recovered from (a store that failed, a move that failed). */
  reportError(error: unknown, context: string): void
  /**
   * Handlers waiting inside a drain or close of this connection (or of one of its consumers):
   * no drain or close waits for them, or two of them would wait for each other.
   */
  readonly insideWaits: TaskSet
  /** `task` waits inside a drain or close from now on (until {@link leaveInside}). */
  enterInside(task: DeliveryTask): void
  leaveInside(task: DeliveryTask): void
}

/** A set of tasks, as drains and closes read it. */
export interface TaskSet {
  has(task: DeliveryTask): boolean
  readonly size: number
}

/** What a consumer is struggling with, for health. */
export interface ConsumerTrouble {
  readonly queue: string
  /** The subscription's channel was lost and it is not consuming again yet. */
  readonly unsubscribed: boolean
  /** Queues a copy could not be moved to, while a move is being tried again. */
  readonly failingMoves: readonly string[]
  /** Why the idempotency store is failing, while it keeps failing. */
  readonly storeFailure: string | undefined
}
