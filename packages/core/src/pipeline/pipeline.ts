import { randomUUID } from 'node:crypto'
import type { Codec } from '../codec/codec.js'
import { Ack, isAckResult, type AckResult } from '../consumer/ack.js'
import type { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Consumer } from '../consumer/consumer.js'
import type { Handler, Message } from '../consumer/message.js'
import type { Duration } from '../duration.js'
import {
  MAX_ID_BYTES,
  RESERVED_HEADER_PREFIX,
  envelopeAge,
  writeEnvelope,
  type Envelope,
} from '../envelope/envelope.js'
import { ConfigurationError, FatalError, describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import { describeValue } from '../ordered/partition.js'
import type { Publisher, SendOptions } from '../publisher/publisher.js'
import { validateQueueName } from '../retry/queue-names.js'
import { Topology } from '../topology/topology.js'
import type { Declaration, Headers } from '../transport/transport.js'
import type { StepDefinition } from './pipeline-builder.js'
import { pipelineRegistry, type PipelineHost } from './pipeline-host.js'
import { readRoute, routeHeaders } from './route.js'
import type { Hop, StepHook } from './step-hook.js'
import { UnservedSteps } from './unserved-steps.js'

/** What a step decided about one message, kept until the engine settles it. */
type StepOutcome =
  | { readonly kind: 'hop'; readonly hop: Hop }
  | { readonly kind: 'end'; readonly outcome: 'completed' | 'ended_early'; readonly runId: string }

/** Where a hop goes, as the pipeline's `#resolve` reads a route entry. */
interface Target {
  readonly exchange: string
  readonly routingKey: string
  /** The queue it reaches. */
  readonly queue: string
  /** Whether `queue` is one of this pipeline's steps. */
  readonly own: boolean
  /** What to declare again when the hop comes back unroutable or finds the exchange gone. */
  readonly declarations: readonly Declaration[]
}

/** The route a message is on, as this step reads it. */
interface Position {
  readonly steps: readonly string[]
  /** Which of `steps` this step is. */
  readonly at: number
  readonly runId: string
  /** How many entries of `steps` name this step. */
  readonly visits: number
  /** The message carried no route: a run enters the pipeline here (an outbox record, say). */
  readonly entering: boolean
}

/**
 * The key a step claims a message under (docs/design.md §15): `{pipeline}.{step}:{id}`, and
 * `{pipeline}.{step},{position}:{id}` when the route visits the step more than once, so a
 * revisit is not its first visit's duplicate (`,` is in no step name).
 */
function claimKeyOf(queue: string, position: Position, id: string): string {
  return position.visits > 1 ? `${queue},${position.at}:${id}` : `${queue}:${id}`
}

/**
 * A pipeline: steps on queues `{name}.{step}`. A message enters at the first step with
 * {@link send}; each step's result is published (and confirmed) through the pipeline's
 * exchange `{name}`, with the next step's name as routing key, before the step's delivery is
 * acked, carrying the run's id, its first-seen time, origin and correlation, and the family's
 * route headers (`x-acemq-route`, `x-acemq-route-position`, `x-acemq-route-id`). A step that
 * returns `null` ends the run early; the last step completes it.
 *
 * @example
 * ```ts
 * const runId = await checkout.send(order, { id: order.id })
 * checkout.queueFor('charge') // 'checkout.charge'
 * console.log(checkout.entered, checkout.completed, checkout.endedEarly, checkout.inFlight)
 * await checkout.close()
 * ```
 */
export class Pipeline<T> implements AsyncDisposable {
  /** The pipeline's name. */
  readonly name: string
  /** The step names, in order. */
  readonly steps: readonly string[]
  /** The step queues, `{name}.{step}`, in order. */
  readonly queues: readonly string[]
  readonly #host: PipelineHost
  readonly #definitions: readonly StepDefinition[]
  readonly #options: ConsumerOptions
  readonly #declarations: ReadonlyMap<string, readonly Declaration[]>
  readonly #codec: Codec
  readonly #consumers: Consumer[] = []
  readonly #outcomes = new WeakMap<Message<unknown>, StepOutcome>()
  readonly #arrivals = new WeakMap<Message<unknown>, Headers>()
  readonly #positions = new WeakMap<Message<unknown>, Position>()
  #publisher: Publisher<T> | undefined
  #entered = 0
  #completed = 0
  #endedEarly = 0
  #closing: Promise<void> | undefined
  readonly #unserved: UnservedSteps
  #unregisterHealth: (() => void) | undefined

  /**
   * Created by {@link PipelineBuilder.build}.
   *
   * @internal
   */
  constructor(
    host: PipelineHost,
    name: string,
    definitions: readonly StepDefinition[],
    options: ConsumerOptions,
    declarations: ReadonlyMap<string, readonly Declaration[]>,
    formerSteps: readonly string[] = [],
  ) {
    this.#host = host
    this.name = name
    this.#definitions = definitions
    this.#options = options
    this.#declarations = declarations
    this.steps = Object.freeze(definitions.map((step) => step.name))
    this.queues = Object.freeze(this.steps.map((step) => `${name}.${step}`))
    this.#codec = host.codecs.find(undefined) as Codec
    this.#unserved = new UnservedSteps(name, this.steps, host.transport)
    for (const step of formerSteps) this.#unserved.watch(`${name}.${step}`)
  }

  /**
   * Runs that entered this pipeline in this process: sent (and confirmed by the broker), or
   * taken up at a step from a message that carried no route (an outbox record published to a
   * step), counted once that step's delivery is acked.
   */
  get entered(): number {
    return this.#entered
  }

  /** Runs whose last step returned, in this process. */
  get completed(): number {
    return this.#completed
  }

  /** Runs a step ended early by returning `null`, in this process. */
  get endedEarly(): number {
    return this.#endedEarly
  }

  /** Step handlers of this pipeline running in this process now, until their hop and ack are done. */
  get inFlight(): number {
    return this.#consumers.reduce((sum, consumer) => sum + consumer.inFlight, 0)
  }

  /** Whether {@link close} has been called. */
  get closed(): boolean {
    return this.#closing !== undefined
  }

  /** The queue of `step`: `{name}.{step}`. */
  queueFor(step: string): string {
    const index = this.steps.indexOf(step)
    if (index < 0) {
      throw new ConfigurationError(
        `pipeline '${this.name}': queueFor(step) must name one of its steps (${this.steps.join(', ')}); got ${describeValue(step)}`,
      )
    }
    return this.queues[index] as string
  }

  /**
   * Sends `payload` into the first step and resolves with the run's id once the broker has
   * confirmed it. Options as `publisher.send`: a business id as `id` makes two sends of it one
   * run to idempotent steps; the envelope's type defaults to the pipeline's name.
   */
  async send(payload: T, options: SendOptions = {}): Promise<string> {
    if (this.#closing !== undefined) {
      throw new ConfigurationError(`pipeline '${this.name}' is closed: build it again to send`)
    }
    const id = options.id ?? randomUUID()
    // Into the first step as a hop goes: the pipeline's exchange, the step's name.
    this.#publisher ??= this.#host.publisher<T>(this.name, this.steps[0] as string, (envelope) =>
      routeHeaders({ steps: this.steps, position: 0, runId: envelope.id }),
    )
    await this.#publisher.send(payload, { type: this.name, ...options, id })
    this.#entered++
    return id
  }

  /**
   * Stops this pipeline's step consumers in this process: running steps finish (their hops
   * confirmed and acks written) within `drainTimeout` (default 20 s). The queues stay.
   */
  close(options: { readonly drainTimeout?: Duration } = {}): Promise<void> {
    this.#closing ??= Promise.all(this.#consumers.map((c) => c.close(options))).then(() => {
      this.#unregisterHealth?.()
      pipelineRegistry(this.#host.owner).delete(this.name)
    })
    return this.#closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /**
   * Starts the consumers of the steps in `consumed`; called once by {@link PipelineBuilder.build}.
   *
   * @internal
   */
  async start(consumed: ReadonlySet<string>): Promise<void> {
    const unregister = this.#host.registerHealth({
      name: `pipeline:${this.name}`,
      report: () => this.#unserved.report(),
    })
    this.#unregisterHealth = unregister
    const started = await Promise.allSettled(
      this.#definitions.flatMap((step, index) =>
        consumed.has(step.name)
          ? [
              this.#host.startConsumer(
                this.queues[index] as string,
                this.#options,
                this.#handler(index),
                this.#hook(index),
              ),
            ]
          : [],
      ),
    )
    for (const s of started) if (s.status === 'fulfilled') this.#consumers.push(s.value)
    const failure = started.find((s) => s.status === 'rejected')
    if (failure !== undefined) {
      unregister()
      await Promise.all(this.#consumers.map((c) => c.close({ drainTimeout: 0 })))
      throw failure.reason
    }
  }

  #hook(index: number): StepHook {
    const step = this.steps[index] as string
    const queue = this.queues[index] as string
    // `arrived` is called just before `claimKey`, for the same message (see StepHook).
    let arrival: { readonly id: string; readonly key: string } | undefined
    return {
      claimKey: (id) => {
        const key = arrival?.id === id ? arrival.key : `${queue}:${id}`
        arrival = undefined
        return key
      },
      arrived: (message, wireHeaders) => {
        const position = this.#positionOf(message, wireHeaders, index)
        this.#positions.set(message, position)
        const id = message.envelope.id
        arrival = { id, key: claimKeyOf(queue, position, id) }
      },
      nextHop: (message) => {
        const outcome = this.#outcomes.get(message)
        return outcome?.kind === 'hop' ? outcome.hop : undefined
      },
      acked: (message) => {
        // Counted once: a redelivery the claim finds done is acked without reaching here.
        if (this.#positions.get(message)?.entering === true) this.#entered++
        const outcome = this.#outcomes.get(message)
        if (outcome?.kind !== 'end') return
        if (outcome.outcome === 'completed') this.#completed++
        else this.#endedEarly++
        this.#host.instrumentation?.pipelineRunFinished?.({
          pipeline: this.name,
          runId: outcome.runId,
          step,
          outcome: outcome.outcome,
          durationMs: envelopeAge(message.envelope, Date.now()),
        })
      },
    }
  }

  /** The engine handler of step `index`: runs the step, and decides the hop or the end. */
  #handler(index: number): Handler<unknown> {
    const definition = this.#definitions[index] as StepDefinition
    return async (message, context): Promise<AckResult | undefined> => {
      const position = this.#positions.get(message)
      if (position === undefined) {
        throw new Error(
          `step '${definition.name}' of pipeline '${this.name}' got a message the engine did not announce`,
        )
      }
      const returned = await definition.run(message.payload, {
        signal: context.signal,
        pipeline: this.name,
        step: definition.name,
        runId: position.runId,
        message,
      })
      if (isAckResult(returned) && returned.kind !== 'accept') return returned
      const next = position.at + 1
      if (next >= position.steps.length) {
        this.#outcomes.set(message, { kind: 'end', outcome: 'completed', runId: position.runId })
        return undefined
      }
      if (returned === null || isAckResult(returned)) {
        this.#outcomes.set(message, {
          kind: 'end',
          outcome: 'ended_early',
          runId: position.runId,
        })
        return undefined
      }
      const entry = position.steps[next] as string
      const target = this.#resolve(entry)
      if (returned === undefined) {
        return Ack.park(
          `step '${definition.name}' of pipeline '${this.name}' returned undefined: return the payload for '${target.queue}', or null to end the run`,
        )
      }
      let body: Uint8Array
      try {
        body = this.#codec.encode(returned)
      } catch (error) {
        return Ack.park(
          `could not encode what step '${definition.name}' of pipeline '${this.name}' returned for '${target.queue}' (${this.#codec.contentType}): ${describeError(error)}`,
        )
      }
      if (!target.own) {
        // A hop that can never be routed would be held for ever, and its delivery with it.
        const missing = await this.#unserved.missing(entry, target.queue)
        if (missing !== undefined) return Ack.park(missing)
      }
      const hop = this.#hop(message, { ...position, at: next }, target, body)
      this.#outcomes.set(message, { kind: 'hop', hop })
      return undefined
    }
  }

  /**
   * Where a message is on its route. The route it carries wins over this pipeline's steps (a
   * run keeps the route it was sent with), and its position is the truth when the entry there
   * names this step (a route may visit a step twice: `a,b,a,c`). A position that names another
   * step (a message put back onto a step's queue by hand) gives way to the queue it arrived on:
   * the route's first entry naming this step. A message without a route is at this step of
   * this pipeline's route.
   */
  #positionOf(message: Message<unknown>, wireHeaders: Headers, index: number): Position {
    this.#arrivals.set(message, wireHeaders)
    const step = this.steps[index] as string
    const queue = this.queues[index] as string
    const route = readRoute(wireHeaders)
    if (route === undefined) {
      return { steps: this.steps, at: index, runId: message.envelope.id, visits: 1, entering: true }
    }
    const here = (entry: string | undefined): boolean => entry === step || entry === queue
    const found = route.steps.findIndex(here)
    return {
      steps: route.steps,
      at: here(route.steps[route.position]) ? route.position : found >= 0 ? found : route.position,
      runId: route.runId ?? message.envelope.id,
      visits: route.steps.filter(here).length,
      entering: false,
    }
  }

  /**
   * Where a route entry sends the hop (docs/design.md §15). A step name — one of this
   * pipeline's, or one it does not have (renamed or removed since the run was sent, or served
   * by another process) — is the family's layout: the pipeline's exchange, the step's name as
   * routing key, reaching `{name}.{step}`. A step's queue name (`{name}.{step}`) is that step.
   * Any other entry with a `.` is a queue on the default exchange (a route that leaves the
   * pipeline). An entry that can be no queue ends in the step's `.dlq`.
   */
  #resolve(entry: string): Target {
    const step = entry.startsWith(`${this.name}.`) ? entry.slice(this.name.length + 1) : entry
    const own = this.#declarations.get(step)
    if (own !== undefined) {
      return {
        exchange: this.name,
        routingKey: step,
        queue: `${this.name}.${step}`,
        own: true,
        declarations: own,
      }
    }
    try {
      if (!entry.includes('.')) {
        const queue = validateQueueName(`${this.name}.${entry}`, `the route's next step`)
        // A queue declared by an earlier version (published to on the default exchange) gets
        // its binding when the hop comes back unroutable.
        const declarations = Topology.define()
          .exchange(this.name)
          .bind(queue, this.name, entry)
          .plan()
        return { exchange: this.name, routingKey: entry, queue, own: false, declarations }
      }
      const queue = validateQueueName(entry, `the route's next step`)
      return { exchange: '', routingKey: queue, queue, own: false, declarations: [] }
    } catch (error) {
      throw new FatalError(`the message's route names no queue: ${describeError(error)}`, {
        cause: error,
      })
    }
  }

  /** The next step's message: encoded once, the envelope carried, the route advanced. */
  #hop(message: Message<unknown>, route: Position, target: Target, body: Uint8Array): Hop {
    const incoming = message.envelope
    const envelope: Envelope = {
      id: incoming.id,
      type: incoming.type,
      version: incoming.version,
      correlation: incoming.correlation,
      causation: incoming.id,
      attempt: 1,
      firstSeen: incoming.firstSeen ?? Date.now(),
      origin: incoming.origin ?? this.#host.origin,
      claim: undefined,
      error: undefined,
    }
    const headers = writeEnvelope(envelope, applicationHeaders(this.#arrivals.get(message)))
    Object.assign(
      headers,
      routeHeaders({ steps: route.steps, position: route.at, runId: route.runId }),
    )
    // Inside the step's process scope: the hop's publish span is its child, and the next
    // step's process span the publish span's, so one run is one trace.
    const scope = this.#host.instrumentation?.publishStarted({
      exchange: target.exchange,
      routingKey: target.routingKey,
      messageId: envelope.id,
      correlation: envelope.correlation,
      headers,
    })
    const properties =
      Buffer.byteLength(envelope.id) <= MAX_ID_BYTES
        ? { contentType: this.#codec.contentType, messageId: envelope.id }
        : { contentType: this.#codec.contentType }
    return {
      message: {
        exchange: target.exchange,
        routingKey: target.routingKey,
        body,
        headers,
        properties,
        persistent: true,
        mandatory: true,
      },
      declarations: target.declarations,
      ended: (error) => {
        if (error === undefined) scope?.end('confirmed')
        else
          scope?.end(errorCodeOf(error) === ErrorCodes.UNROUTABLE ? 'unroutable' : 'failed', error)
      },
    }
  }
}

/** The application headers of a delivery, with their wire types: every `x-acemq-*` left out. */
function applicationHeaders(wire: Headers | undefined): Headers {
  const headers: Headers = {}
  if (wire === undefined) return headers
  for (const key of Object.keys(wire)) {
    if (!key.toLowerCase().startsWith(RESERVED_HEADER_PREFIX) && key !== '__proto__') {
      headers[key] = wire[key]
    }
  }
  return headers
}
