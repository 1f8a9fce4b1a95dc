import { MAX_ID_BYTES, envelopeAge, writeCopyHeaders, type Envelope } from '../envelope/envelope.js'
import { describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import { deadLetterQueueName, parkedQueueName, rungQueueName } from '../retry/queue-names.js'
import { consumerDeclarations } from '../topology/topology.js'
import type { Declaration, Delivery, MessageProperties } from '../transport/transport.js'
import type { AckResult } from './ack.js'
import type { ConsumerHost } from './consumer-host.js'
import type { ConsumerOptions } from './consumer-options.js'
import type { DeadLetterOutcome, DeadLetterReport } from './dead-letter.js'
import type { DeliveryTask, Handling, Settled, TaskWaits } from './delivery-task.js'

/** The longest a failed move waits before it is tried again. */
const MAX_MOVE_BACKOFF_MS = 30_000
/** The first wait before a failed move is tried again. */
const FIRST_MOVE_BACKOFF_MS = 1_000

/**
 * A consumer's copies and moves (docs/design.md §6, §13): a retry through a rung or back onto
 * its queue, a put-back, a move to `{queue}.dlq` or `{queue}.parked` — each a copy republished
 * and confirmed before the original is acked, and a failed one held and tried again.
 */
export class Mover {
  readonly #host: ConsumerHost
  readonly #queue: string
  readonly #options: ConsumerOptions
  readonly #waits: TaskWaits
  /** Queues a copy could not be moved to, with how many moves to each are being tried again. */
  readonly #failing = new Map<string, number>()

  constructor(host: ConsumerHost, queue: string, options: ConsumerOptions, waits: TaskWaits) {
    this.#host = host
    this.#queue = queue
    this.#options = options
    this.#waits = waits
  }

  /** Queues a copy could not be moved to, while a move is being tried again. */
  get failingMoves(): readonly string[] {
    return [...this.#failing.keys()]
  }

  /** Whether any move is being tried again. */
  get failing(): boolean {
    return this.#failing.size > 0
  }

  /**
   * A retry the handler asked for: a wait in the consumer and a copy back onto the queue, or a
   * copy to the rung the policy names, attempt + 1; `{queue}.dlq` once the policy gives up.
   */
  async retry(handling: Handling, result: Extract<AckResult, { kind: 'retry' }>): Promise<Settled> {
    const { task, envelope, scope } = handling
    const policy = this.#options.retryPolicy
    let delayMs: number
    let target = this.#queue
    if (policy === undefined) {
      delayMs = result.delayMs ?? this.#options.retryDelayMs
    } else {
      const age = envelopeAge(envelope, Date.now())
      const wait = policy.nextWait(envelope.attempt, age)
      if (wait === null) {
        const why =
          policy.giveUpReason(envelope.attempt, age) ??
          `gave up after ${envelope.attempt} attempt(s)`
        return this.setAside(handling, 'dead_lettered', `${why}: ${result.reason}`)
      }
      delayMs = wait.delayMs
      if (wait.inBroker) target = rungQueueName(this.#queue, wait.delayMs)
    }
    if (target === this.#queue && !(await this.#waits.wait(task, delayMs, true))) {
      // A drain or close cut the wait short: hand the message back as it came, attempt
      // unchanged. (A lost channel has handed it back already.)
      task.delivery.nack(true)
      return 'released'
    }
    const next: Envelope = {
      ...envelope,
      attempt: envelope.attempt + 1,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.move(handling, target, next, undefined)
    if (moved !== 'moved') return moved
    scope?.retried(delayMs, target !== this.#queue)
    return 'retried'
  }

  /** In progress (or a store that could not answer): wait, then put back with the attempt unchanged. */
  async putBack(
    handling: Handling,
    delayMs: number,
    outcome: 'in_progress' | 'retried',
  ): Promise<Settled> {
    const { task, envelope, scope } = handling
    if (!(await this.#waits.wait(task, delayMs, true))) {
      task.delivery.nack(true)
      return 'released'
    }
    const copy: Envelope = {
      ...envelope,
      firstSeen: envelope.firstSeen ?? Date.now(),
      error: undefined,
    }
    const moved = await this.move(handling, this.#queue, copy, undefined)
    if (moved !== 'moved') return moved
    if (outcome === 'retried') scope?.retried(delayMs, false)
    return outcome
  }

  /** A copy to `{queue}.dlq` (`dead_lettered`, `rejected`, `refused`) or `{queue}.parked` with `reason`. */
  async setAside(handling: Handling, outcome: DeadLetterOutcome, reason: string): Promise<Settled> {
    const target =
      outcome === 'parked' ? parkedQueueName(this.#queue) : deadLetterQueueName(this.#queue)
    const moved = await this.move(handling, target, handling.envelope, reason)
    if (moved !== 'moved') return moved
    this.#landed(handling, outcome, target, reason)
    return outcome
  }

  /**
   * A copy landed in `.dlq` or `.parked`: telemetry hears of it, and so does `onDeadLetter`
   * (the consumer's, else the connection's), whatever sent it there. A hook that throws is
   * reported and changes nothing.
   */
  #landed(handling: Handling, outcome: DeadLetterOutcome, target: string, reason: string): void {
    handling.scope?.setAside(outcome, target, reason)
    const report: DeadLetterReport = {
      queue: this.#queue,
      target,
      messageId: handling.envelope.id,
      outcome,
      reason,
      attempt: handling.envelope.attempt,
    }
    try {
      if (this.#options.onDeadLetter === undefined) this.#host.deadLettered(report)
      else this.#options.onDeadLetter(report)
    } catch (error) {
      this.#host.reportError(error, `onDeadLetter failed for message ${report.messageId}`)
    }
  }

  /**
   * Republishes a copy to `target` through the default exchange, mandatory and persistent,
   * and acks the original only once the broker has confirmed and routed the copy.
   *
   * A copy that fails is tried again in this process, with backoff, while the delivery's
   * channel lives: the missing destination is declared again, the failure is reported and
   * health turns DEGRADED. The original is never handed back with requeue to spin (on a quorum
   * queue every requeue spends the broker's delivery limit); it goes back only when the
   * consumer closes. A copy that can never be written as it is (a header the client cannot
   * encode) is parked instead, without its application headers. The publish is tied to the
   * connection's lifetime, not the handler's signal, so a message given up on during shutdown
   * still reaches its dead-letter queue.
   */
  async move(
    handling: Handling,
    target: string,
    envelope: Envelope,
    error: string | undefined,
  ): Promise<'moved' | 'parked' | 'released'> {
    const { task } = handling
    const { delivery } = task
    let failure: unknown
    try {
      await this.#publishCopy(delivery, target, envelope, error, true)
    } catch (first) {
      failure = first
    }
    if (failure === undefined) {
      if (!task.abandoned) delivery.ack()
      return 'moved'
    }
    if (isPermanent(failure) && !task.abandoned) {
      const parked = parkedQueueName(this.#queue)
      const reason = `could not republish to '${target}' as it is (${describeError(failure)}); its application headers were dropped${error === undefined ? '' : `: ${error}`}`
      try {
        await this.#publishCopy(delivery, parked, envelope, reason, false)
        delivery.ack()
        this.#landed(handling, 'parked', parked, reason)
        return 'parked'
      } catch (second) {
        failure = second
      }
    }
    const moved = await this.tryAgain(
      task,
      target,
      envelope.id,
      () => this.#publishCopy(delivery, target, envelope, error, true),
      consumerDeclarations(this.#queue, this.#options.retryPolicy),
      failure,
    )
    if (!moved) return 'released'
    if (!task.abandoned) delivery.ack()
    return 'moved'
  }

  /**
   * Tries a failed publish of a copy (or a pipeline hop) to `target` again, with backoff, while
   * the delivery's channel lives; `declarations` are declared again first when it came back
   * unroutable. True once it is published (the caller acks); false when closing or the lost
   * channel ended it, the delivery handed back.
   */
  async tryAgain(
    task: DeliveryTask,
    target: string,
    id: string,
    publish: () => Promise<void>,
    declarations: readonly Declaration[],
    firstFailure: unknown,
  ): Promise<boolean> {
    const { delivery } = task
    let failure = firstFailure
    let triedRedeclared = false
    this.#failing.set(target, (this.#failing.get(target) ?? 0) + 1)
    try {
      for (let attempt = 1; ; attempt++) {
        if (task.abandoned) return false
        this.#host.reportError(
          failure,
          `could not move message ${id} to '${target}' (try ${attempt}); it is held and tried again`,
        )
        let redeclared = false
        const code = errorCodeOf(failure)
        // A pipeline hop goes through the pipeline's exchange, which can be deleted too.
        if (code === ErrorCodes.UNROUTABLE || code === ErrorCodes.EXCHANGE_NOT_FOUND) {
          if (target.startsWith(`${this.#queue}.retry.`)) {
            this.#host.instrumentation?.rungMissing?.(this.#queue, target)
          }
          // The destination is gone (someone deleted it): declare it again, and if that
          // worked, try at once rather than after the backoff.
          redeclared = await this.#host.transport.declare(declarations).then(
            () => true,
            (declareError: unknown) => {
              this.#host.reportError(declareError, `could not declare '${target}' again`)
              return false
            },
          )
        }
        // Once only: a destination that is declared but still does not route must not spin.
        const backoff = redeclared && !triedRedeclared ? 0 : moveBackoff(attempt)
        triedRedeclared ||= redeclared
        if (!(await this.#waits.wait(task, backoff, false))) {
          // Closing (or the channel is gone, and the broker has the message back already).
          if (!task.abandoned) delivery.nack(true)
          return false
        }
        try {
          await publish()
          return true
        } catch (next) {
          failure = next
        }
      }
    } finally {
      const left = (this.#failing.get(target) ?? 1) - 1
      if (left > 0) this.#failing.set(target, left)
      else this.#failing.delete(target)
    }
  }

  #publishCopy(
    delivery: Delivery,
    target: string,
    envelope: Envelope,
    error: string | undefined,
    keepHeaders: boolean,
  ): Promise<void> {
    return this.#host.transport.publish(
      {
        exchange: '',
        routingKey: target,
        body: delivery.body,
        headers: writeCopyHeaders(
          keepHeaders ? (delivery.wireHeaders ?? delivery.headers) : {},
          envelope,
          error === undefined ? undefined : { error },
        ),
        properties: republishedProperties(delivery.properties, envelope.id),
        persistent: true,
        mandatory: true,
      },
      { whenBlocked: 'wait', signal: this.#host.closingSignal, lane: 'engine' },
    )
  }
}

/** Backoff before the n-th retry of a failed move: 1 s, 2 s, 4 s … up to 30 s. */
export function moveBackoff(attempt: number): number {
  return Math.min(FIRST_MOVE_BACKOFF_MS * 2 ** Math.min(attempt - 1, 20), MAX_MOVE_BACKOFF_MS)
}

/** A failure that sending the same copy again can never fix. */
export function isPermanent(error: unknown): boolean {
  const code = errorCodeOf(error)
  return code === ErrorCodes.CONFIGURATION || code === ErrorCodes.UNENCODABLE
}

/**
 * The properties a copy keeps: the original's, less `expiration` (a copy waits by its
 * queue's rules, not the first publish's) and `userId` (the broker checks it against the
 * connection's user), with the message id set to the envelope's when it fits.
 */
export function republishedProperties(
  properties: MessageProperties,
  messageId: string,
): MessageProperties {
  const { expiration: _expiration, userId: _userId, messageId: _messageId, ...kept } = properties
  // An id longer than AMQP's message-id can hold still travels in x-acemq-id.
  return Buffer.byteLength(messageId) <= MAX_ID_BYTES ? { ...kept, messageId } : kept
}
