import { AsyncLocalStorage } from 'node:async_hooks'
import type { CodecRegistry } from '../codec/codec-registry.js'
import type { Consumer } from '../consumer/consumer.js'
import { ConsumerEngine } from '../consumer/consumer-engine.js'
import type { TaskSet } from '../consumer/consumer-host.js'
import { ConsumerOptions } from '../consumer/consumer-options.js'
import type { DeliveryHook } from '../consumer/delivery-hook.js'
import type { DeliveryTask } from '../consumer/delivery-task.js'
import type { OnDeadLetter } from '../consumer/dead-letter.js'
import type { Interceptor } from '../consumer/interceptor.js'
import type { Handler } from '../consumer/message.js'
import { AceMqError, ClosedError, ConfigurationError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import { consumerHost } from './connection-hosts.js'
import { HealthContributors } from '../health/health-aggregation.js'
import { deferred, type Deferred } from '../internal/timers.js'
import type { OutboxRelay } from '../outbox/outbox-relay.js'
import { validateQueueName } from '../retry/queue-names.js'
import type { Scheduler } from '../scheduler/scheduler.js'
import { consumerDeclarations } from '../topology/topology.js'
import type { Instrumentation } from '../telemetry/instrumentation.js'
import type { Transport, TransportEvent } from '../transport/transport.js'

/**
 * What one connection holds while it runs: its consumers, pause flags, the handlers waiting
 * inside a drain or close, and the error hook. `AceMq` is the public facade over it; the host
 * adapters (connection-hosts.ts) are views of it. Internal.
 */
export class ConnectionState {
  readonly consumers = new Set<ConsumerEngine<unknown>>()
  /** `mq.intercept()`'s, by order; replaced (never changed) at each call. */
  interceptors: readonly Interceptor[] = []
  readonly contributors = new HealthContributors()
  readonly currentTask = new AsyncLocalStorage<DeliveryTask | undefined>()
  readonly closingController = new AbortController()
  readonly idleWaiters = new Set<() => void>()
  /** Outbox relays started on this connection: closing stops them after their round. */
  readonly relays = new Set<OutboxRelay>()
  /** What the engine calls: the installed instrumentation, guarded so it cannot fail a message. */
  instrumentation: Instrumentation | undefined
  inFlight = 0
  consumingPaused = false
  publishingPaused = false
  closing: Promise<void> | undefined
  /** Set once closing has drained: publishes started after this are refused. */
  publishingClosed = false
  scheduler: Scheduler | undefined
  /** Handlers that called close(). */
  readonly closers = new Set<DeliveryTask>()
  /**
   * Handlers waiting inside a drain or close of this connection or of one of its consumers, by
   * how many such waits each is in: no drain or close waits for them, so two handlers that
   * drain or close from inside never wait for each other.
   */
  readonly inside = new Map<DeliveryTask, number>()
  /** The drains still waiting; a close answers them `false` when it is done. */
  readonly pendingDrains = new Set<(result: boolean) => void>()
  /** Resolves once closing has drained every handler but the ones that called it. */
  readonly othersDrained: Deferred<void> = deferred<void>()

  constructor(
    readonly transport: Transport,
    readonly codecs: CodecRegistry,
    readonly origin: string,
    readonly onError: ((error: unknown, context: string) => void) | undefined,
    readonly onDeadLetter: OnDeadLetter,
  ) {}

  enterInside(task: DeliveryTask): void {
    this.inside.set(task, (this.inside.get(task) ?? 0) + 1)
    // The set of tasks nobody waits for grew: a drain or close may be done now.
    for (const check of [...this.idleWaiters]) check()
    for (const consumer of this.consumers) consumer.recheckIdle()
  }

  leaveInside(task: DeliveryTask): void {
    const left = (this.inside.get(task) ?? 1) - 1
    if (left > 0) this.inside.set(task, left)
    else this.inside.delete(task)
  }

  busy(except: TaskSet): number {
    let busy = 0
    for (const consumer of this.consumers) busy += consumer.busy(except)
    return busy
  }

  assertOpen(): void {
    if (this.closing !== undefined) throw new ClosedError()
  }

  /** Publishes go through until closing has drained the handlers that may be making them. */
  assertCanPublish(): void {
    if (this.publishingClosed) throw new ClosedError()
  }

  reportError(error: unknown, context: string): void {
    try {
      this.onError?.(error, context)
    } catch {
      // A failing error hook must not take the engine down with it.
    }
  }

  onTransportEvent(event: TransportEvent): void {
    if (event.type === 'disconnected') {
      for (const consumer of this.consumers) consumer.connectionLost()
      this.reportError(
        event.error ?? new AceMqError('connection lost', { code: ErrorCodes.CONNECTION_DOWN }),
        'the connection was lost; recovering',
      )
    }
  }

  /** Stops handing deliveries to handlers; they wait at the gate (`held`), never acked. */
  pauseConsuming(): void {
    this.consumingPaused = true
    for (const consumer of this.consumers) consumer.paused()
  }

  /** `AceMq.consume`: the argument checks, the failure topology, then the engine. */
  async consume<T>(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<T>,
  ): Promise<Consumer> {
    validateQueueName(queue, 'consume(queue)')
    if (!(options instanceof ConsumerOptions)) {
      throw new ConfigurationError(
        'consume(options) must be a ConsumerOptions, e.g. ConsumerOptions.defaults()',
      )
    }
    if (typeof handler !== 'function') {
      throw new ConfigurationError(`consume(handler) must be a function; got ${String(handler)}`)
    }
    this.assertOpen()
    // A queue that is not there (a misspelt name) is refused before anything is declared for
    // it: a failed consume must leave no {queue}.dlq, .parked or rung behind.
    await this.transport.queueLength?.(queue).catch((error: unknown) => {
      throw errorCodeOf(error) === ErrorCodes.NOT_FOUND
        ? new AceMqError(
            `consume(queue): queue '${queue}' does not exist; declare it first (applyTopology)`,
            { code: ErrorCodes.NOT_FOUND, cause: error },
          )
        : error
    })
    await this.transport.declare(consumerDeclarations(queue, options.retryPolicy))
    return this.startEngine(queue, options, handler)
  }

  /** Starts an engine consumer (with an ordered queue's or a pipeline step's hook, if any). */
  async startEngine<T>(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<T>,
    hook?: DeliveryHook,
  ): Promise<Consumer> {
    const consumer = new ConsumerEngine<T>(consumerHost(this), queue, options, handler, hook)
    this.consumers.add(consumer as ConsumerEngine<unknown>)
    try {
      await consumer.start()
    } catch (error) {
      this.consumers.delete(consumer as ConsumerEngine<unknown>)
      throw error
    }
    return consumer
  }
}
