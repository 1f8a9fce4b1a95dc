import { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Message } from '../consumer/message.js'
import { ConfigurationError } from '../errors.js'
import type { IdempotencyStore } from '../idempotency/idempotency-store.js'
import { describeValue } from '../ordered/partition.js'
import { validateQueueName } from '../retry/queue-names.js'
import type { RetryPolicy } from '../retry/retry-policy.js'
import { Topology } from '../topology/topology.js'
import type { Declaration } from '../transport/transport.js'
import { Pipeline } from './pipeline.js'
import { pipelineRegistry, type PipelineHost } from './pipeline-host.js'

/**
 * What a step gets besides its payload.
 *
 * @example
 * ```ts
 * .step('charge', async (order, { signal, runId }) => billing.charge(order, { signal, key: runId }))
 * ```
 */
export interface StepContext {
  /** Aborts when the consumer or the connection is closing and the drain time is over. */
  readonly signal: AbortSignal
  /** The pipeline's name. */
  readonly pipeline: string
  /** This step's name. */
  readonly step: string
  /** The run's id: the envelope id every hop of the run carries. */
  readonly runId: string
  /** The message as delivered to this step: envelope, application headers, raw body. */
  readonly message: Message<unknown>
}

/**
 * One step: takes the payload its queue delivered and returns the next step's payload, or
 * `null` to end the run here. Throwing retries the step (by the pipeline's retry policy);
 * throwing a `FatalError` moves the message to the step's `.dlq`.
 *
 * @example
 * ```ts
 * const charge: StepFunction<Order, Order> = async (order) => (order.total > 0 ? order : null)
 * ```
 */
export type StepFunction<In, Out> = (
  payload: In,
  context: StepContext,
) => Out | null | Promise<Out | null>

/** Options of {@link PipelineBuilder.build}. */
export interface PipelineBuildOptions {
  /**
   * The steps this process consumes (default: every step). `[]` consumes none: the pipeline
   * only sends, and other processes run its steps.
   */
  readonly consume?: readonly string[]
  /**
   * Steps an earlier version of this pipeline had and this one does not (renamed or removed;
   * default none). Runs sent before the deploy still name them: `health()` reports
   * `pipeline:{name}` DEGRADED while their queues `{name}.{step}` hold messages, since no
   * consumer of this version takes them.
   */
  readonly formerSteps?: readonly string[]
}

/** A step as the builder took it. Internal to core. */
export interface StepDefinition {
  readonly name: string
  readonly run: StepFunction<unknown, unknown>
}

interface Settings {
  readonly steps: readonly StepDefinition[]
  readonly options: ConsumerOptions
}

/**
 * Characters a step name may not contain: `,` separates the route header's step names, `.`
 * would let `{name}.{step}` collide with another step's `.dlq`, `.parked` or rung queue, and
 * whitespace is trimmed away when a route is read.
 */
// eslint-disable-next-line no-control-regex -- control characters are among those refused
const FORBIDDEN_IN_STEP = /[,.\s\u0000-\u001f\u007f]/

/**
 * Describes a pipeline; get one from `mq.pipeline(name)`. Immutable: every method returns a
 * new, frozen builder. {@link PipelineBuilder.build} declares the step queues and starts the
 * steps.
 *
 * @example
 * ```ts
 * const checkout = await mq.pipeline<Order>('checkout')
 *   .step('reserve', async (order) => ({ ...order, reserved: true }))
 *   .step('charge', async (order) => (order.total > 0 ? order : null))
 *   .step('ship', async (order) => { await ship(order); return order })
 *   .idempotent(store)
 *   .withRetry(RetryPolicy.exponential(5, '1s', '1m'))
 *   .build()
 * ```
 */
export class PipelineBuilder<T, Current = T> {
  /** The pipeline's name: its step queues are `{name}.{step}`. */
  readonly name: string
  readonly #host: PipelineHost
  readonly #settings: Settings

  /**
   * Created by `mq.pipeline(name)`.
   *
   * @internal
   */
  constructor(host: PipelineHost, name: string, settings?: Settings) {
    this.#host = host
    this.name = validateQueueName(name, 'pipeline(name)')
    this.#settings = settings ?? { steps: [], options: ConsumerOptions.defaults() }
    Object.freeze(this)
  }

  #with<Next>(changes: Partial<Settings>): PipelineBuilder<T, Next> {
    return new PipelineBuilder<T, Next>(this.#host, this.name, { ...this.#settings, ...changes })
  }

  /**
   * Adds a step: its queue is `{name}.{step}`, and `run` turns what arrives there into what the
   * next step gets (`null` ends the run). Step names are checked by {@link build}.
   */
  step<Out>(name: string, run: StepFunction<Current, Out>): PipelineBuilder<T, Out> {
    if (typeof run !== 'function') {
      throw new ConfigurationError(
        `pipeline '${this.name}': step(name, run) needs a function for step ${describeValue(name)}; got ${describeValue(run)}`,
      )
    }
    const step: StepDefinition = { name, run: run as StepFunction<unknown, unknown> }
    return this.#with<Out>({ steps: [...this.#settings.steps, step] })
  }

  /**
   * Every step claims its message in `store` under `{pipeline}.{step}:{id}` before it runs, as an
   * idempotent consumer does: a step redelivered after it finished is acked without running
   * again, and one whose claim is still live elsewhere is put back after the default
   * in-progress delay (5 s).
   */
  idempotent(store: IdempotencyStore): PipelineBuilder<T, Current> {
    return this.#with<Current>({ options: this.#settings.options.idempotent(store) })
  }

  /** The retry policy of every step's queue: its rungs and its `.dlq`. */
  withRetry(policy: RetryPolicy): PipelineBuilder<T, Current> {
    return this.#with<Current>({ options: this.#settings.options.withRetry(policy) })
  }

  /** Unacknowledged messages each step's consumer may hold (default 20). */
  withPrefetch(prefetch: number): PipelineBuilder<T, Current> {
    return this.#with<Current>({ options: this.#settings.options.withPrefetch(prefetch) })
  }

  /** Messages each step handles at once in this process (default 1). */
  withConcurrency(concurrency: number): PipelineBuilder<T, Current> {
    return this.#with<Current>({ options: this.#settings.options.withConcurrency(concurrency) })
  }

  /**
   * Checks the steps, declares the pipeline's durable direct exchange `{name}` and every step
   * queue `{name}.{step}` (quorum, dead-lettering to its `.dlq`, with its `.parked` queue and
   * the retry policy's rungs) bound to it by the step's name, and starts consuming the
   * steps (all of them unless `options.consume` names some). Rejects with a
   * `ConfigurationError`, having declared nothing, for a pipeline without steps, a step name
   * given twice or one that cannot be part of a queue name, or a pipeline of this name already
   * built on this connection.
   */
  async build(options: PipelineBuildOptions = {}): Promise<Pipeline<T>> {
    const { name } = this
    const { steps } = this.#settings
    if (steps.length === 0) {
      throw new ConfigurationError(
        `pipeline '${name}' has no steps: add at least one with step(name, run) before build()`,
      )
    }
    const seen = new Set<string>()
    for (const step of steps) {
      validateStepName(name, step.name)
      if (seen.has(step.name)) {
        throw new ConfigurationError(
          `pipeline '${name}': the step name '${step.name}' is given twice; each step needs a name of its own (it names the queue '${name}.${step.name}')`,
        )
      }
      seen.add(step.name)
    }
    const consumed = options.consume ?? steps.map((step) => step.name)
    if (!Array.isArray(consumed) || consumed.some((step) => !seen.has(step as string))) {
      throw new ConfigurationError(
        `pipeline '${name}': build(options.consume) must list steps of this pipeline (${[...seen].join(', ')}); got ${JSON.stringify(consumed)}`,
      )
    }
    const formerSteps = options.formerSteps ?? []
    if (!Array.isArray(formerSteps) || formerSteps.some((step) => seen.has(step as string))) {
      throw new ConfigurationError(
        `pipeline '${name}': build(options.formerSteps) must list steps this version does not have (it has ${[...seen].join(', ')}); got ${JSON.stringify(formerSteps)}`,
      )
    }
    for (const step of formerSteps) validateStepName(name, step)
    // Every name is checked (a suffix that does not fit, say) before anything is declared.
    // The family's layout (docs/design.md §15): the pipeline's durable direct exchange, each
    // step queue bound to it by its step name. Each step keeps what to declare again when a
    // hop to it comes back unroutable.
    const policy = this.#settings.options.retryPolicy
    const exchange = Topology.define().exchange(name)
    let all = exchange
    const declarations = new Map<string, readonly Declaration[]>()
    for (const step of steps) {
      const queue = `${name}.${step.name}`
      const withQueue = (topology: Topology): Topology =>
        (policy === undefined
          ? topology.queueWithDeadLetter(queue)
          : topology.queueWithRetry(queue, policy)
        ).bind(queue, name, step.name)
      declarations.set(step.name, withQueue(exchange).plan())
      all = withQueue(all)
    }
    this.#host.assertOpen()
    const registry = pipelineRegistry(this.#host.owner)
    if (registry.has(name)) {
      throw new ConfigurationError(
        `pipeline '${name}' is already built on this connection: use the Pipeline its build() returned, or close it first`,
      )
    }
    registry.add(name)
    try {
      await this.#host.transport.declare(all.plan())
      const pipeline = new Pipeline<T>(
        this.#host,
        name,
        steps,
        this.#settings.options,
        declarations,
        formerSteps,
      )
      await pipeline.start(new Set(consumed))
      return pipeline
    } catch (error) {
      registry.delete(name)
      throw error
    }
  }
}

function validateStepName(pipeline: string, step: unknown): void {
  if (typeof step !== 'string' || step === '' || FORBIDDEN_IN_STEP.test(step)) {
    throw new ConfigurationError(
      `pipeline '${pipeline}': step name ${describeValue(step)} cannot be part of a queue name: a step name is a non-empty string without ',' (the route header joins step names with commas), '.', whitespace or control characters`,
    )
  }
  validateQueueName(`${pipeline}.${step}`, `pipeline '${pipeline}': the queue of step '${step}'`)
}
