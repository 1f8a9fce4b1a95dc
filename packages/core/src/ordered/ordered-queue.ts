import { Ack, isAckResult, type AckResult } from '../consumer/ack.js'
import { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Handler, Message } from '../consumer/message.js'
import { toMillis, type Duration } from '../duration.js'
import { AceMqError, ConfigurationError, describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { HealthReport } from '../health/health.js'
import { deferred, type Deferred } from '../internal/timers.js'
import type { Publisher, SendOptions } from '../publisher/publisher.js'
import { deadLetterQueueName, parkedQueueName, validateQueueName } from '../retry/queue-names.js'
import { Topology } from '../topology/topology.js'
import type { InPlaceFailures, InPlaceStep } from './in-place-failures.js'
import { OrderedConsumer } from './ordered-consumer.js'
import { orderedRegistry, type OrderedHost } from './ordered-host.js'
import {
  DEFAULT_PARTITIONS,
  MAX_PARTITIONS,
  describeValue,
  partitionHash,
  validatePartitions,
} from './partition.js'

/**
 * What an ordered queue does once its handler has failed a message `attempts` times in place:
 * `stop` halts the partition until `resume(p)`, `skip` moves the message to `{name}.{p}.dlq` and
 * goes on, `retry-in-place` never gives up.
 */
export type FailureMode = 'stop' | 'retry-in-place' | 'skip'

/** Options of {@link OrderedQueueBuilder.onFailure}. */
export interface OnFailureOptions {
  /** Handler runs before `stop` halts or `skip` gives up (default 3; 1 to 1000). */
  readonly attempts?: number
  /** The wait between two runs (default 1 s). */
  readonly delay?: Duration
}

/** Handler runs before an ordered queue's `stop` or `skip` gives up on a message (3). */
export const DEFAULT_ORDERED_ATTEMPTS = 3

/** The wait between two runs of an ordered queue's handler on a failing message (1 s). */
export const DEFAULT_ORDERED_RETRY_DELAY = 1_000

const MAX_ATTEMPTS = 1_000
const FAILURE_MODES: readonly FailureMode[] = ['stop', 'retry-in-place', 'skip']
/**
 * The header an ordered queue's message carries its key in (an application header, kept on
 * every copy): what `acemq dlq peek` shows beside the partition.
 */
export const ORDERED_KEY_HEADER = 'acemq-ordered-key'

/** RabbitMQ: one consumer of the queue at a time gets its messages; the others wait their turn. */
const SINGLE_ACTIVE_CONSUMER = 'x-single-active-consumer'

interface Settings<T> {
  readonly partitions: number
  readonly keyOf: ((payload: T) => string) | undefined
  readonly mode: FailureMode
  readonly attempts: number
  readonly delayMs: number
}

/**
 * Describes an ordered queue; get one from `mq.ordered(name)`. Immutable: every method returns
 * a new, frozen builder. {@link OrderedQueueBuilder.declare} checks the broker and declares it.
 *
 * @example
 * ```ts
 * const ledger = await mq.ordered<Entry>('ledger')
 *   .partitions(8)
 *   .keyedBy((entry) => entry.account)
 *   .onFailure('stop', { attempts: 3, delay: '1s' })
 *   .declare()
 * ```
 */
export class OrderedQueueBuilder<T> {
  /** The ordered queue's name: its partitions are `{name}.0` … `{name}.{n-1}`. */
  readonly name: string
  readonly #host: OrderedHost
  readonly #settings: Settings<T>

  /**
   * Created by `mq.ordered(name)`.
   *
   * @internal
   */
  constructor(host: OrderedHost, name: string, settings?: Settings<T>) {
    this.#host = host
    this.name = validateQueueName(name, 'ordered(name)')
    this.#settings = settings ?? {
      partitions: DEFAULT_PARTITIONS,
      keyOf: undefined,
      mode: 'stop',
      attempts: DEFAULT_ORDERED_ATTEMPTS,
      delayMs: DEFAULT_ORDERED_RETRY_DELAY,
    }
    Object.freeze(this)
  }

  #with(changes: Partial<Settings<T>>): OrderedQueueBuilder<T> {
    return new OrderedQueueBuilder<T>(this.#host, this.name, { ...this.#settings, ...changes })
  }

  /** How many partitions (queues) the keys are spread over: 1 to 1024, default 4. */
  partitions(count: number): OrderedQueueBuilder<T> {
    return this.#with({ partitions: validatePartitions(count, 'partitions(count)') })
  }

  /**
   * The key of a payload: messages with the same key go to the same partition and are handled
   * one at a time, in the order they were sent. It must return a string.
   */
  keyedBy(keyOf: (payload: T) => string): OrderedQueueBuilder<T> {
    if (typeof keyOf !== 'function') {
      throw new ConfigurationError(
        `keyedBy(keyOf) must be a function from a payload to its key; got ${describeValue(keyOf)}`,
      )
    }
    return this.#with({ keyOf })
  }

  /**
   * What happens when the handler fails a message: it is run again in place, `delay` apart,
   * `attempts` times in all; then `stop` (the default) halts the partition, `skip` moves the
   * message to `{name}.{p}.dlq`, and `retry-in-place` never gives up.
   */
  onFailure(mode: FailureMode, options: OnFailureOptions = {}): OrderedQueueBuilder<T> {
    if (!FAILURE_MODES.includes(mode)) {
      throw new ConfigurationError(
        `onFailure(mode) must be 'stop', 'retry-in-place' or 'skip'; got ${describeValue(mode)}`,
      )
    }
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(
        `onFailure(options) must be an object such as { attempts: 3, delay: '1s' }; got ${describeValue(options)}`,
      )
    }
    const attempts = options.attempts ?? DEFAULT_ORDERED_ATTEMPTS
    if (!Number.isInteger(attempts) || attempts < 1 || attempts > MAX_ATTEMPTS) {
      throw new ConfigurationError(
        `onFailure(options.attempts) must be a whole number from 1 to ${MAX_ATTEMPTS}; got ${describeValue(attempts)}`,
      )
    }
    const delayMs = toMillis(
      options.delay ?? DEFAULT_ORDERED_RETRY_DELAY,
      'onFailure(options.delay)',
    )
    return this.#with({ mode, attempts, delayMs })
  }

  /**
   * Checks the broker, declares the partition queues and returns the ordered queue, registered
   * in health as `ordered:{name}`. Each partition `{name}.{p}` is a durable quorum queue with a
   * single active consumer, dead-lettering to `{name}.{p}.dlq`, next to its `.dlq` and `.parked`
   * queues. Rejects with a `ConfigurationError`, having declared nothing, when the broker holds
   * this ordered queue with another number of partitions, or when this connection has declared
   * it already.
   */
  async declare(): Promise<OrderedQueue<T>> {
    const { name } = this
    const settings = this.#settings
    const queues = Array.from({ length: settings.partitions }, (_, p) => `${name}.${p}`)
    // Every name it will declare is checked before anything is sent.
    for (const queue of queues) {
      deadLetterQueueName(queue)
      parkedQueueName(queue)
    }
    this.#host.assertOpen()
    const registry = orderedRegistry(this.#host.owner)
    if (registry.has(name)) {
      throw new ConfigurationError(
        `ordered queue '${name}' is already declared on this connection: use the OrderedQueue its declare() returned`,
      )
    }
    registry.set(name, null)
    try {
      await checkPartitionCount(this.#host, name, settings.partitions)
      let topology = Topology.define()
      for (const queue of queues) {
        topology = topology.queueWithDeadLetter(queue, {
          arguments: { [SINGLE_ACTIVE_CONSUMER]: true },
        })
      }
      await this.#host.transport.declare(topology.plan())
      const ordered = new OrderedQueue<T>(this.#host, name, queues, settings)
      this.#host.registerHealth({ name: `ordered:${name}`, report: () => ordered.report() })
      registry.set(name, ordered as OrderedQueue<unknown>)
      return ordered
    } catch (error) {
      registry.delete(name)
      throw error
    }
  }
}

/**
 * The broker must not hold this ordered queue with another partition count: keys would land
 * in other partitions than the ones their earlier messages wait in. Looks at `{name}.0`,
 * `{name}.{n-1}` and `{name}.{n}`; a transport that cannot tell whether a queue exists
 * (no `queueLength`) is not checked.
 */
async function checkPartitionCount(
  host: OrderedHost,
  name: string,
  partitions: number,
): Promise<void> {
  const { transport } = host
  if (transport.queueLength === undefined) return
  const exists = async (p: number): Promise<boolean> => {
    try {
      await transport.queueLength?.(`${name}.${p}`)
      return true
    } catch (error) {
      if (errorCodeOf(error) === ErrorCodes.NOT_FOUND) return false
      throw error
    }
  }
  // One after the other: a transport may answer them on one channel, which a missing queue closes.
  const first = await exists(0)
  const last = await exists(partitions - 1)
  const beyond = await exists(partitions)
  if (first === last && !beyond) return
  let existing = 0
  while (existing <= MAX_PARTITIONS && (await exists(existing))) existing++
  const found =
    existing === 0
      ? `has '${name}.${partitions - 1}' but no '${name}.0'`
      : `exists on the broker with ${existing} partition(s) ('${name}.0' to '${name}.${existing - 1}')`
  throw new ConfigurationError(
    `ordered queue '${name}' ${found}, so it cannot be declared with ${partitions}: its keys would go to other partitions than the ones their earlier messages wait in. Declare it with partitions(${existing === 0 ? partitions : existing}), or drain and delete its queues first. Nothing was declared.`,
  )
}

interface Halt {
  readonly id: string
  readonly reason: string
  readonly resume: Deferred<void>
}

/** One partition's state in this process. */
interface PartitionState {
  /**
   * The message it halted on, until `resume(p)`; kept after its channel was lost, so the
   * message halts again at once if it comes back here (docs/design.md §17).
   */
  halted: Halt | undefined
  /** Whether this process holds the halted message now: only then is the partition halted. */
  holding: boolean
  /** The halted message came back after a lost channel: halt again without failing it. */
  haltAgain: boolean
}

/**
 * A queue whose messages are handled in order per key: `send` puts a message on its key's
 * partition (`{name}.{p}`), and `consume` handles each partition one message at a time, the
 * partitions in parallel. Across processes only one consumer of a partition is active at a
 * time; when it goes, the next one takes over where it stopped.
 *
 * @example
 * ```ts
 * const ledger = await mq.ordered<Entry>('ledger').partitions(8).keyedBy((e) => e.account).declare()
 * await ledger.send({ account: 'acct-7', amount: 10 })
 * await ledger.consume(async (message) => { await book(message.payload) })
 * if (ledger.haltedPartitions.length > 0) ledger.resume(ledger.haltedPartitions[0])
 * ```
 */
export class OrderedQueue<T> {
  /** The ordered queue's name. */
  readonly name: string
  /** How many partitions it has. */
  readonly partitions: number
  /** The partition queues, `{name}.0` to `{name}.{n-1}`. */
  readonly queues: readonly string[]
  /** What happens after `attempts` failed runs of a message. */
  readonly failureMode: FailureMode
  /** Handler runs before `stop` halts or `skip` gives up. */
  readonly attempts: number
  /** The wait between two runs of a failing message, in milliseconds. */
  readonly retryDelayMs: number
  readonly #host: OrderedHost
  // Typed on unknown, so an OrderedQueue<Entry> is an OrderedQueue<unknown> too.
  readonly #keyOf: ((payload: unknown) => string) | undefined
  readonly #publishers: (Publisher<T> | undefined)[]
  readonly #states: PartitionState[]
  #consumer: OrderedConsumer | undefined
  #handled = 0
  #failed = 0
  #skipped = 0

  /**
   * Created by {@link OrderedQueueBuilder.declare}.
   *
   * @internal
   */
  constructor(host: OrderedHost, name: string, queues: readonly string[], settings: Settings<T>) {
    this.#host = host
    this.name = name
    this.partitions = settings.partitions
    this.queues = Object.freeze([...queues])
    this.failureMode = settings.mode
    this.attempts = settings.attempts
    this.retryDelayMs = settings.delayMs
    this.#keyOf = settings.keyOf as ((payload: unknown) => string) | undefined
    this.#publishers = Array.from({ length: settings.partitions }, () => undefined)
    this.#states = Array.from({ length: settings.partitions }, () => ({
      halted: undefined,
      holding: false,
      haltAgain: false,
    }))
  }

  /** Messages whose handler succeeded (and were acked), since this queue was declared here. */
  get handled(): number {
    return this.#handled
  }

  /** Handler runs that failed: threw, or returned `Ack.retry` or `Ack.release`. */
  get failed(): number {
    return this.#failed
  }

  /**
   * Messages set aside: moved to `{name}.{p}.dlq` (by `skip`, a `FatalError` or
   * `Ack.deadLetter`) or to `{name}.{p}.parked` (`Ack.park`).
   */
  get skipped(): number {
    return this.#skipped
  }

  /**
   * The partitions halted in this process, ascending: those whose failed message it holds. A
   * lost channel gives the message back, and with it the halt (another process may take the
   * partition over and finish it).
   */
  get haltedPartitions(): number[] {
    const halted: number[] = []
    this.#states.forEach((state, p) => {
      if (state.halted !== undefined && state.holding) halted.push(p)
    })
    return halted
  }

  /** The partition queue `{name}.{partition}`. */
  queueFor(partition: number): string {
    return this.queues[this.#partitionIndex(partition, 'queueFor(partition)')] as string
  }

  /** The partition a key's messages go to. */
  partitionOf(key: string): number {
    if (typeof key !== 'string') {
      throw new ConfigurationError(
        `ordered queue '${this.name}': partitionOf(key) must be a string; got ${describeValue(key as unknown)}`,
      )
    }
    return partitionHash(key) % this.partitions
  }

  /**
   * Sends `payload` to its key's partition and resolves once the broker confirms it, as
   * `publisher.send` does (the same options; the envelope's type defaults to the ordered
   * queue's name). Rejects with a `ConfigurationError` naming the queue when the key function
   * throws or does not return a string, and nothing is sent.
   */
  async send(payload: T, options: SendOptions = {}): Promise<void> {
    const key = this.#keyOfPayload(payload)
    const partition = this.partitionOf(key)
    const publisher = (this.#publishers[partition] ??= this.#host.publisher<T>(
      this.queues[partition] as string,
    ))
    // The key travels, so an operator looking into a partition's dead letters can read it.
    const headers = { ...options.headers, [ORDERED_KEY_HEADER]: key }
    await publisher.send(payload, { type: this.name, ...options, headers })
  }

  /**
   * Consumes every partition: one message at a time per partition (prefetch 1), the partitions
   * in parallel. A failing message is run again in place; see {@link FailureMode}. One
   * consumer per ordered queue and connection; close it before consuming again.
   */
  async consume(handler: Handler<T>): Promise<OrderedConsumer> {
    if (typeof handler !== 'function') {
      throw new ConfigurationError(
        `ordered queue '${this.name}': consume(handler) must be a function; got ${describeValue(handler)}`,
      )
    }
    if (this.#consumer !== undefined && !this.#consumer.closed) {
      throw new ConfigurationError(
        `ordered queue '${this.name}' is already being consumed on this connection: close that consumer first`,
      )
    }
    this.#host.assertOpen()
    const options = ConsumerOptions.defaults().withPrefetch(1).withConcurrency(1)
    const started = await Promise.allSettled(
      this.queues.map((queue, p) =>
        this.#host.startConsumer(
          queue,
          options,
          this.#partitionHandler(p, handler),
          this.#failures(p),
        ),
      ),
    )
    const consumers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))
    const failure = started.find((s) => s.status === 'rejected')
    if (failure !== undefined) {
      await Promise.all(consumers.map((c) => c.close({ drainTimeout: 0 })))
      throw failure.reason
    }
    const consumer = new OrderedConsumer(this.name, consumers)
    this.#consumer = consumer
    return consumer
  }

  /**
   * Lets a halted partition go on: its held message is run again (its attempts start over).
   * Answers whether the partition was halted.
   */
  resume(partition: number): boolean {
    const state = this.#states[this.#partitionIndex(partition, 'resume(partition)')]
    const halt = state?.halted
    if (state === undefined || halt === undefined) return false
    state.halted = undefined
    state.holding = false
    halt.resume.resolve()
    return true
  }

  /** The `ordered:{name}` health report. */
  report(): HealthReport {
    const halted = this.haltedPartitions
    const details: Record<string, string> = {
      partitions: String(this.partitions),
      handled: String(this.#handled),
      failed: String(this.#failed),
      skipped: String(this.#skipped),
    }
    if (halted.length > 0) details['halted'] = halted.join(',')
    return {
      name: `ordered:${this.name}`,
      status: halted.length > 0 ? 'DEGRADED' : 'UP',
      details,
    }
  }

  #partitionIndex(partition: number, argumentName: string): number {
    if (!Number.isInteger(partition) || partition < 0 || partition >= this.partitions) {
      throw new ConfigurationError(
        `ordered queue '${this.name}': ${argumentName} must be a partition from 0 to ${this.partitions - 1}; got ${describeValue(partition)}`,
      )
    }
    return partition
  }

  #keyOfPayload(payload: T): string {
    const keyOf = this.#keyOf
    if (keyOf === undefined) {
      throw new ConfigurationError(
        `ordered queue '${this.name}' has no key function, so it cannot send: declare it with keyedBy(payload => key)`,
      )
    }
    let key: unknown
    try {
      key = keyOf(payload)
    } catch (error) {
      throw new ConfigurationError(
        `ordered queue '${this.name}': its key function threw, so nothing was sent: ${describeError(error)}`,
        { cause: error },
      )
    }
    if (typeof key !== 'string') {
      throw new ConfigurationError(
        `ordered queue '${this.name}': its key function must return a string; got ${describeValue(key)}, so nothing was sent`,
      )
    }
    return key
  }

  /** The user's handler, counted, and sending a halted message that came back straight to its halt. */
  #partitionHandler(partition: number, handler: Handler<T>): Handler<unknown> {
    const state = this.#states[partition] as PartitionState
    const counted = (result: void | AckResult): void | AckResult => {
      if (!isAckResult(result) || result.kind === 'accept') this.#handled++
      else if (result.kind === 'dead-letter' || result.kind === 'park') this.#skipped++
      else this.#failed++
      return result
    }
    const failed = (error: unknown): never => {
      this.#failed++
      if (errorCodeOf(error) === ErrorCodes.FATAL) this.#skipped++
      throw error
    }
    // Not async: a handler that returns at once costs no promise here (each partition waits for
    // every message's ack, so each step between delivery and ack shows in its throughput).
    return (message, context) => {
      const halt = state.halted
      if (halt !== undefined && !state.holding) {
        if (halt.id === message.envelope.id) {
          state.haltAgain = true
          return Ack.retry(halt.reason)
        }
        // Another process dealt with the message this one halted on.
        state.halted = undefined
      }
      let returned: ReturnType<Handler<T>>
      try {
        returned = handler(message as Message<T>, context)
      } catch (error) {
        return failed(error)
      }
      return isPromiseLike(returned)
        ? Promise.resolve(returned).then(counted, failed)
        : counted(returned)
    }
  }

  /** The engine's failure hook for one partition. */
  #failures(partition: number): InPlaceFailures {
    const state = this.#states[partition] as PartitionState
    const queue = this.queues[partition] as string
    return {
      failed: (message, failures, reason): InPlaceStep => {
        const halt = state.halted
        if (state.haltAgain && halt !== undefined) {
          state.haltAgain = false
          state.holding = true
          return { kind: 'halt', until: halt.resume.promise }
        }
        if (this.failureMode === 'retry-in-place' || failures < this.attempts) {
          return { kind: 'again', delayMs: this.retryDelayMs }
        }
        if (this.failureMode === 'skip') {
          this.#skipped++
          return { kind: 'give-up', reason: `gave up after ${failures} attempt(s): ${reason}` }
        }
        const halted: Halt = { id: message.envelope.id, reason, resume: deferred<void>() }
        state.halted = halted
        state.holding = true
        this.#host.reportError(
          new AceMqError(`halted after ${failures} attempt(s): ${reason}`, {
            code: ErrorCodes.PARTITION_HALTED,
          }),
          `partition ${partition} of ordered queue '${this.name}' ('${queue}') halted on message ${message.envelope.id}; resume(${partition}) runs it again`,
        )
        return { kind: 'halt', until: halted.resume.promise }
      },
      holdEnded: (message, why) => {
        const halt = state.halted
        if (halt === undefined || halt.id !== message.envelope.id || !state.holding) return
        // Either way the message goes back and this process no longer holds the partition
        // halted; after a lost channel it is remembered, to halt again if it comes back here.
        state.holding = false
        if (why === 'closing') state.halted = undefined
      },
    }
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function'
}
