import { randomUUID } from 'node:crypto'
import { readEnvelope } from '../envelope/envelope.js'
import { describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { ClaimResult, IdempotencyStore } from '../idempotency/idempotency-store.js'
import { assertIdempotencyKey } from '../idempotency/store-validation.js'
import type { ProcessScope } from '../telemetry/instrumentation.js'
import type { AckResult } from './ack.js'
import type { Claims } from './claims.js'
import { ConsumeChain } from './consume-chain.js'
import type { ConsumerHost } from './consumer-host.js'
import type { ConsumerOptions } from './consumer-options.js'
import type { DeliveryHook, Hop } from './delivery-hook.js'
import type { DeliveryTask, Handling, Settled, TaskWaits } from './delivery-task.js'
import type { Handler, HandlerContext, Message } from './message.js'
import { isPermanent, type Mover } from './mover.js'
import { isInvalidPayload, runHandler } from './run-handler.js'

/**
 * Processing one delivery: decodes, claims, runs the handler and turns its result into the
 * action the design names (docs/design.md §6) — ack, retry in the consumer or through a rung,
 * dead-letter, park, release — with the feature hook's members (see {@link DeliveryHook}) at
 * their places. Every delivery ends in {@link TaskWaits.finished}, once.
 */
export class DeliveryProcessor<T> {
  readonly #host: ConsumerHost
  readonly #queue: string
  readonly #options: ConsumerOptions
  readonly #handler: Handler<T>
  readonly #context: HandlerContext
  readonly #waits: TaskWaits
  readonly #mover: Mover
  readonly #claims: Claims
  readonly #hook: DeliveryHook | undefined
  /** The hook, when it holds failed deliveries in place (an ordered consumer's partition). */
  readonly #inPlace: InPlaceHook | undefined
  /** The hook, when it forwards accepted deliveries (a pipeline step). */
  readonly #forwards: ForwardHook | undefined
  /** Decodes, runs and settles without a promise when the handler returns none (see {@link #handlePlain}). */
  readonly #plain: boolean
  /** The interceptors: none on the common path, which then reads one empty list per delivery. */
  readonly #chain: ConsumeChain
  /** The handler telling the interceptors' `onError`, made when first needed. */
  #intercepted: Handler<T> | undefined
  /** Messages refused by an interceptor (for health). */
  #refused = 0

  /** Messages refused by an interceptor and moved to `{queue}.dlq` (for health). */
  get refused(): number {
    return this.#refused
  }

  constructor(
    parts: {
      readonly host: ConsumerHost
      readonly queue: string
      readonly options: ConsumerOptions
      readonly handler: Handler<T>
      readonly context: HandlerContext
      readonly waits: TaskWaits
      readonly mover: Mover
      readonly claims: Claims
    },
    hook: DeliveryHook | undefined,
  ) {
    this.#host = parts.host
    this.#queue = parts.queue
    this.#options = parts.options
    this.#handler = parts.handler
    this.#context = parts.context
    this.#waits = parts.waits
    this.#mover = parts.mover
    this.#claims = parts.claims
    this.#hook = hook
    this.#inPlace = holdsInPlace(hook) ? hook : undefined
    this.#forwards = forwards(hook) ? hook : undefined
    // A hook that acts before the handler or after an accept needs #handle (and its promise).
    this.#chain = new ConsumeChain(parts.host, parts.queue, parts.options.interceptors)
    this.#plain =
      parts.options.store === undefined &&
      hook?.arrived === undefined &&
      this.#forwards === undefined
  }

  /**
   * Handles one delivery to the end, and always ends in `TaskWaits.finished`. Not async: a plain
   * consumer's delivery whose handler returns without a promise is decoded, handled and acked
   * in this call, with no promise made for it (see {@link #handlePlain}).
   */
  process(task: DeliveryTask): void {
    const { delivery } = task
    let scope: ProcessScope | undefined
    let handled: Settled | Promise<Settled>
    try {
      const { envelope, headers } = readEnvelope(delivery.headers, {
        messageId: delivery.properties.messageId,
        routingKey: delivery.routingKey,
      })
      scope = this.#host.instrumentation?.processStarted({
        queue: this.#queue,
        messageId: envelope.id,
        correlation: envelope.correlation,
        attempt: envelope.attempt,
        headers,
      })
      const handling: Handling = { task, envelope, headers, scope }
      handled = this.#handlePlain(handling) ?? this.#handle(handling)
    } catch (error) {
      this.#defect(task, scope, error)
      return
    }
    if (!(handled instanceof Promise)) {
      this.#processed(task, scope, handled)
      return
    }
    handled.then(
      (settled) => this.#processed(task, scope, settled),
      (error: unknown) => this.#defect(task, scope, error),
    )
  }

  #processed(task: DeliveryTask, scope: ProcessScope | undefined, settled: Settled): void {
    try {
      scope?.end(settled === 'released' || settled === 'abandoned' ? 'rejected' : settled)
    } finally {
      this.#waits.finished(task)
    }
  }

  /**
   * Only a defect gets here — in the engine, a feature's hook or the transport (an ack that
   * throws): hand the message back, never lose it, and say so.
   */
  #defect(task: DeliveryTask, scope: ProcessScope | undefined, error: unknown): void {
    this.#host.reportError(
      error,
      `handling a message on '${this.#queue}' (it goes back to the queue and runs again)`,
    )
    try {
      task.delivery.nack(true)
    } catch {
      // It cannot be settled at all: the broker takes it back when its channel goes.
    }
    try {
      scope?.end('rejected', error)
    } finally {
      this.#waits.finished(task)
    }
  }

  /**
   * The common case without a promise around it: a consumer (an ordered one's partition too) with
   * no idempotency store, not a pipeline step, whose delivery decodes. Undefined otherwise:
   * {@link #handle} takes it, and a body that does not decode is decoded there again and parked
   * with the reason.
   */
  #handlePlain(handling: Handling): Settled | Promise<Settled> | undefined {
    // A pipeline step forwards what it accepts: #handle does that. An ordered consumer's run
    // that fails goes on in place (#settleHandled), one that succeeds is settled here.
    if (!this.#plain || this.#chain.list.length > 0) return undefined
    const { delivery } = handling.task
    const codec = this.#host.codecs.find(delivery.properties.contentType)
    // An asynchronous decode (a claim check, docs/design.md §26) is the full path's.
    if (codec === undefined || codec.decodeAsync !== undefined) return undefined
    let payload: T
    try {
      payload = codec.decode(delivery.body) as T
    } catch {
      return undefined
    }
    const message = this.#message(handling, payload)
    const result = this.#runHandler(handling, message)
    if (!(result instanceof Promise)) return this.#settleHandled(handling, message, result)
    return result.then((settled) => this.#settleHandled(handling, message, settled))
  }

  /** What {@link #handle} does after the handler, for a plain or an ordered consumer. */
  #settleHandled(
    handling: Handling,
    message: Message<T>,
    result: AckResult,
  ): Settled | Promise<Settled> {
    if (handling.task.abandoned) return 'abandoned'
    if (this.#inPlace !== undefined && (result.kind === 'retry' || result.kind === 'release')) {
      return this.#runAgainInPlace(this.#inPlace, handling, message, result)
    }
    return this.#settle(handling, result)
  }

  #message({ task: { delivery }, envelope, headers }: Handling, payload: T): Message<T> {
    return {
      payload,
      envelope,
      headers,
      queue: this.#queue,
      contentType: delivery.properties.contentType,
      body: delivery.body,
      redelivered: delivery.redelivered,
      replyTo: delivery.properties.replyTo,
    }
  }

  async #handle(handling: Handling): Promise<Settled> {
    const { task, envelope } = handling
    const { delivery } = task
    const contentType = delivery.properties.contentType
    const codec = this.#host.codecs.find(contentType)
    if (codec === undefined) {
      const reason = `could not decode: no codec for content type '${contentType ?? ''}'`
      return this.#mover.setAside(handling, 'parked', reason)
    }
    let payload: T
    try {
      payload = (
        codec.decodeAsync === undefined
          ? codec.decode(delivery.body)
          : await codec.decodeAsync(delivery.body)
      ) as T
    } catch (error) {
      // A claim-check store that did not answer may on the next attempt: retried, not parked
      // (docs/design.md §26).
      if (codec.decodeAsync !== undefined && errorCodeOf(error) !== ErrorCodes.DECODE) {
        return this.#mover.retry(handling, {
          kind: 'retry',
          reason: describeError(error),
          delayMs: undefined,
        })
      }
      return this.#mover.setAside(handling, 'parked', `could not decode: ${describeError(error)}`)
    }

    const store = this.#options.store
    // Each claim has its own owner, so a release can only ever free this delivery's claim.
    const owner = store === undefined ? undefined : randomUUID()
    const message = this.#message(handling, payload)
    // A pipeline step claims `{pipeline}.{step}:{id}` (one run's id is on every step's
    // message), with the route position when the route revisits the step: it reads the
    // message's route first, so `arrived` comes just before `claimKey`.
    this.#hook?.arrived?.(message as Message<unknown>, delivery.wireHeaders ?? delivery.headers)
    const key = this.#hook?.claimKey?.(envelope.id) ?? envelope.id
    if (store !== undefined) {
      try {
        assertIdempotencyKey(key)
      } catch (error) {
        // No store can ever claim it: asking again would put it back for ever.
        const reason = `invalid message id: ${describeError(error)}`
        return this.#mover.setAside(handling, 'parked', reason)
      }
      let claim: ClaimResult
      try {
        claim = await this.#claims.claim(store, key, owner as string)
      } catch (error) {
        if (errorCodeOf(error) === ErrorCodes.CONFIGURATION) {
          const reason = `the idempotency store refused the message id: ${describeError(error)}`
          return this.#mover.setAside(handling, 'parked', reason)
        }
        // The store could not answer: nothing ran, so put the message back unchanged and
        // ask again later. It is never acked unhandled, and spends no attempt.
        this.#claims.failed(error, `the idempotency store could not claim message ${envelope.id}`)
        return this.#mover.putBack(handling, this.#options.inProgressDelayMs, 'retried')
      }
      this.#claims.answered()
      if (claim === 'duplicate') {
        delivery.ack()
        return 'acked'
      }
      if (claim === 'in_progress') {
        return this.#mover.putBack(handling, this.#options.inProgressDelayMs, 'in_progress')
      }
      if (delivery.settleable === false) {
        // The channel went while the store answered: the broker has the message back.
        this.#claims.release(store, key, owner)
        return 'released'
      }
    }

    const interceptors = this.#chain.list
    if (interceptors.length > 0) {
      const refusal = await this.#chain.before(interceptors, message as Message<unknown>)
      if (refusal !== undefined) {
        // Not handled: the claim goes back, and the message to `{queue}.dlq`, never requeued.
        if (store !== undefined) this.#claims.release(store, key, owner)
        const reason = `an interceptor refused it: ${refusal}`
        const settled = await this.#mover.setAside(handling, 'refused', reason)
        if (settled === 'refused') this.#refused++
        return settled
      }
    }
    let result = await this.#runHandler(handling, message, interceptors.length > 0)
    if (task.abandoned) return 'abandoned'
    if (interceptors.length > 0) {
      result = await this.#chain.after(interceptors, message as Message<unknown>, result)
      if (task.abandoned) return 'abandoned'
    }
    if (this.#inPlace !== undefined && (result.kind === 'retry' || result.kind === 'release')) {
      return this.#runAgainInPlace(this.#inPlace, handling, message, result)
    }
    if (this.#forwards !== undefined && result.kind === 'accept') {
      return this.#forward(this.#forwards, handling, message, { store, key, owner })
    }

    if (store !== undefined) {
      if (result.kind === 'accept') await this.#claims.confirm(store, key, owner as string)
      else this.#claims.release(store, key, owner)
    }
    return this.#settle(handling, result)
  }

  /**
   * An accepted delivery of a consumer whose hook forwards (a pipeline step; see
   * {@link DeliveryHook.nextHop}): the next step's message is
   * published and confirmed, then the claim is confirmed, then the delivery is acked. A hop
   * that fails is held and tried again like a failed move, without running the step again; one
   * that can never be written as it is parks the delivery with the reason. Either way the
   * claim is released unless the hop was confirmed.
   */
  async #forward(
    step: ForwardHook,
    handling: Handling,
    message: Message<T>,
    claim: {
      readonly store: IdempotencyStore | undefined
      readonly key: string
      readonly owner: string | undefined
    },
  ): Promise<Settled> {
    const { task } = handling
    const { store, key, owner } = claim
    const hop = step.nextHop(message as Message<unknown>)
    if (hop !== undefined) {
      const published = await this.#publishHop(handling, hop)
      if (published !== 'moved') {
        if (store !== undefined) this.#claims.release(store, key, owner)
        return published
      }
    }
    if (store !== undefined) await this.#claims.confirm(store, key, owner as string)
    if (task.abandoned) return 'abandoned'
    task.delivery.ack()
    step.acked?.(message as Message<unknown>)
    return 'acked'
  }

  async #publishHop(handling: Handling, hop: Hop): Promise<Settled | 'moved'> {
    // Named by the queue it reaches: a hop through a pipeline's exchange goes, by the family's
    // layout, to `{pipeline}.{step}` (docs/design.md §15).
    const { exchange, routingKey } = hop.message
    const target = exchange === '' ? routingKey : `${exchange}.${routingKey}`
    const publish = (): Promise<void> =>
      this.#host.transport.publish(hop.message, {
        whenBlocked: 'wait',
        signal: this.#host.closingSignal,
        lane: 'engine',
      })
    let failure: unknown
    try {
      await publish()
      hop.ended(undefined)
      return 'moved'
    } catch (first) {
      failure = first
    }
    if (isPermanent(failure)) {
      hop.ended(failure)
      const reason = `could not publish the next step's message to '${target}': ${describeError(failure)}`
      return this.#mover.setAside(handling, 'parked', reason)
    }
    const published = await this.#mover.tryAgain(
      handling.task,
      target,
      handling.envelope.id,
      publish,
      hop.declarations,
      failure,
    )
    hop.ended(published ? undefined : failure)
    return published ? 'moved' : 'released'
  }

  /**
   * A failed run of a consumer whose hook holds in place (an ordered consumer; see
   * {@link DeliveryHook.failed}): a failure is never put back;
   * the delivery is held and its handler run again in place, halted until resumed, or moved to
   * `{queue}.dlq`, as the hook decides. A hold cut short leaves the delivery unsettled: the
   * channel's close (or its loss) gives it back to the queue in its place.
   */
  async #runAgainInPlace(
    inPlace: InPlaceHook,
    handling: Handling,
    message: Message<T>,
    firstResult: AckResult,
  ): Promise<Settled> {
    const { task, scope } = handling
    let result = firstResult
    for (let failures = 1; ; failures++) {
      if (result.kind !== 'retry' && result.kind !== 'release') {
        return this.#settle(handling, result)
      }
      const reason = result.kind === 'retry' ? result.reason : 'released by the handler'
      const step = inPlace.failed(message as Message<unknown>, failures, reason)
      if (step.kind === 'give-up') {
        return this.#mover.setAside(handling, 'dead_lettered', step.reason)
      }
      const cut = await this.#waits.hold(task, step.kind === 'again' ? step.delayMs : step.until)
      if (cut !== undefined) {
        inPlace.holdEnded?.(message as Message<unknown>, cut)
        return 'released'
      }
      if (step.kind === 'again') scope?.retried(step.delayMs, false)
      // A resumed halt starts counting again.
      else failures = 0
      result = await this.#runHandler(handling, message)
      if (task.abandoned) return 'abandoned'
    }
  }

  #runHandler(
    handling: Handling,
    message: Message<T>,
    intercepted = false,
  ): AckResult | Promise<AckResult> {
    const handler = intercepted
      ? (this.#intercepted ??= this.#chain.wrap(this.#handler))
      : this.#handler
    return runHandler(this.#host.currentTask, handler, this.#context, handling, message)
  }

  /** Not async: an accepted message is acked without a promise around it. */
  #settle(handling: Handling, result: AckResult): Settled | Promise<Settled> {
    const { delivery } = handling.task
    switch (result.kind) {
      case 'accept':
        delivery.ack()
        return 'acked'
      case 'release':
        delivery.nack(true)
        return 'released'
      case 'dead-letter':
        return this.#mover.setAside(
          handling,
          isInvalidPayload(result) ? 'invalid' : 'rejected',
          result.reason,
        )
      case 'park':
        return this.#mover.setAside(handling, 'parked', result.reason)
      case 'retry':
        return this.#mover.retry(handling, result)
    }
  }
}

/** A hook that holds failed deliveries in place. */
type InPlaceHook = DeliveryHook & Required<Pick<DeliveryHook, 'failed'>>
/** A hook that forwards accepted deliveries. */
type ForwardHook = DeliveryHook & Required<Pick<DeliveryHook, 'nextHop'>>

function holdsInPlace(hook: DeliveryHook | undefined): hook is InPlaceHook {
  return hook?.failed !== undefined
}

function forwards(hook: DeliveryHook | undefined): hook is ForwardHook {
  return hook?.nextHop !== undefined
}
