import type { ConfirmChannel, Message, Options } from 'amqplib'
import { ErrorCodes, PublishFailedError, UnroutableError } from '@acemq/core'
import { describeError, type OutgoingMessage } from '@acemq/core/spi'
import { PROPERTY_NAMES } from './amqp-helpers.js'

/**
 * One publish waiting for its confirm, and the promise its caller holds. It keeps only what
 * settling and return matching need — not the message, its headers or amqplib's options, which
 * would otherwise live (and be promoted by the garbage collector) until the confirm arrives.
 */
class PendingPublish {
  /** The broker's reply text, once a `basic.return` has been matched to this publish. */
  returnedWith: string | undefined = undefined
  settled = false
  readonly promise: Promise<void>
  resolve!: () => void
  reject!: (error: Error) => void

  constructor(
    /** Write order on this channel. */
    readonly seq: number,
    readonly exchange: string,
    readonly routingKey: string,
    readonly mandatory: boolean,
    readonly body: Buffer,
    readonly messageId: string | undefined,
  ) {
    this.promise = new Promise<void>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }
}

/** What a publisher tells its owner. */
export interface ConfirmPublisherHooks {
  /** One publish has settled (confirmed, returned, nacked or failed): its confirm permit is free. */
  settled(): void
  /** The write buffer has drained. */
  drained(): void
  /** The channel has closed; every outstanding publish has already been rejected. */
  closed(error: Error | undefined): void
  warn(message: string): void
}

function toBuffer(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)
}

/** amqplib publish options for a message: only the properties that have a value. */
export function publishOptions(message: OutgoingMessage): Options.Publish {
  const options: Options.Publish = {
    mandatory: message.mandatory,
    persistent: message.persistent,
  }
  const target = options as Record<string, unknown>
  for (const name of PROPERTY_NAMES) {
    const value = message.properties[name]
    if (value !== undefined && value !== '') target[name] = value
  }
  if (hasOwnKeys(message.headers)) options.headers = message.headers
  return options
}

/** Whether `table` has an own key (without the array `Object.keys` makes, once per publish). */
function hasOwnKeys(table: object): boolean {
  for (const key in table) if (Object.hasOwn(table, key)) return true
  return false
}

/**
 * The publish side of one confirm channel: every publish is a pending entry until its
 * `basic.ack` / `basic.nack` arrives or the channel closes, so each one settles exactly once
 * and hands its confirm permit back.
 *
 * Returns are matched by order. On one channel the broker sends a publish's `basic.return`
 * before its `basic.ack`, and it routes (and returns) publishes in the order they were written,
 * so a return belongs to a pending mandatory publish written after the last one returned, with
 * the same exchange and routing key. Among several such candidates (a headers exchange, or a
 * binding that changed between two publishes) the body and message id pick the right one; only
 * two identical messages racing a binding change could still be told apart wrongly.
 */
export class ConfirmPublisher {
  readonly #channel: ConfirmChannel
  readonly #description: string
  readonly #hooks: ConfirmPublisherHooks
  readonly #pending = new Set<PendingPublish>()
  #seq = 0
  #lastReturnedSeq = 0
  #open = true
  #needsDrain = false
  #channelError: Error | undefined

  constructor(channel: ConfirmChannel, description: string, hooks: ConfirmPublisherHooks) {
    this.#channel = channel
    this.#description = description
    this.#hooks = hooks
    channel.on('error', (error: Error) => {
      this.#channelError = error
    })
    channel.on('handler-error', (error: Error, event: string) => {
      hooks.warn(
        `a listener for the publish channel's '${event}' event threw: ${describeError(error)}`,
      )
    })
    channel.on('return', (message: Message) => this.#returned(message))
    channel.on('drain', () => {
      this.#needsDrain = false
      hooks.drained()
    })
    channel.on('close', () => {
      this.#open = false
      this.#needsDrain = false
      // amqplib has normally failed every confirm callback already; this catches the rest.
      this.failAll(this.#closedError())
      hooks.closed(this.#channelError)
    })
  }

  get isOpen(): boolean {
    return this.#open
  }

  /** The last write filled the channel's buffer: wait for `drained` before writing more. */
  get needsDrain(): boolean {
    return this.#needsDrain
  }

  /** Publishes waiting for their confirm. */
  get outstanding(): number {
    return this.#pending.size
  }

  /**
   * Writes the message now (synchronously) and returns the promise of its confirm. Throws,
   * with nothing written, when amqplib refuses the write (closed channel, unencodable header).
   */
  write(message: OutgoingMessage): Promise<void> {
    const body = toBuffer(message.body)
    const options = publishOptions(message)
    const pending = new PendingPublish(
      this.#seq + 1,
      message.exchange,
      message.routingKey,
      message.mandatory,
      body,
      options.messageId,
    )
    let accepted: boolean
    try {
      accepted = this.#channel.publish(
        message.exchange,
        message.routingKey,
        body,
        options,
        this.#confirmCallback(pending),
      )
    } catch (error) {
      // amqplib throws TypeError or RangeError for what it cannot encode (a header value,
      // a property too long): that message can never be sent as it is.
      const unencodable = error instanceof TypeError || error instanceof RangeError
      throw new PublishFailedError(
        `the message for exchange '${message.exchange || '(default)'}', routing key '${message.routingKey}' could not be written to ${this.#description}: ${describeError(error)}`,
        unencodable ? { cause: error, code: ErrorCodes.UNENCODABLE } : { cause: error },
      )
    }
    this.#seq = pending.seq
    this.#pending.add(pending)
    if (!accepted) this.#needsDrain = true
    return pending.promise
  }

  /**
   * amqplib's callback for one publish's confirm. Made apart from {@link ConfirmPublisher.write}
   * so that it holds only the entry: a closure made there would keep the message and its
   * options alive (they share one scope) for as long as amqplib keeps the callback.
   */
  #confirmCallback(entry: PendingPublish): (error: unknown) => void {
    return (error) => this.#confirmed(entry, error)
  }

  /**
   * Rejects every outstanding publish with `error` (close, or a lost channel); one the broker
   * has already returned is known not to be routed and rejects with `UnroutableError`.
   */
  failAll(error: Error): void {
    for (const entry of [...this.#pending]) this.#settle(entry, this.#returnedError(entry) ?? error)
  }

  #returnedError(entry: PendingPublish): UnroutableError | undefined {
    return entry.returnedWith === undefined
      ? undefined
      : new UnroutableError(entry.exchange, entry.routingKey, entry.returnedWith)
  }

  #closedError(): PublishFailedError {
    const reason = this.#channelError === undefined ? '' : `: ${describeError(this.#channelError)}`
    return new PublishFailedError(
      `the channel to ${this.#description} closed before the broker confirmed the message, so it may or may not have been delivered${reason}`,
      this.#channelError === undefined ? {} : { cause: this.#channelError },
    )
  }

  #confirmed(entry: PendingPublish, error: unknown): void {
    if (entry.settled) return
    // A returned publish was not routed, whatever comes after the return.
    const returned = this.#returnedError(entry)
    if (error === null || error === undefined || returned !== undefined) {
      this.#settle(entry, returned)
      return
    }
    if (error instanceof Error && error.message === 'message nacked') {
      this.#settle(
        entry,
        new PublishFailedError(
          `the broker refused (nacked) the message for exchange '${entry.exchange || '(default)'}', routing key '${entry.routingKey}'`,
        ),
      )
      return
    }
    this.#settle(entry, this.#closedError())
  }

  #settle(entry: PendingPublish, error: Error | undefined): void {
    if (entry.settled) return
    entry.settled = true
    this.#pending.delete(entry)
    this.#hooks.settled()
    if (error === undefined) entry.resolve()
    else entry.reject(error)
  }

  #returned(message: Message): void {
    const { exchange, routingKey } = message.fields
    const replyText = String((message.fields as { replyText?: unknown }).replyText ?? 'NO_ROUTE')
    const messageId: unknown = message.properties.messageId
    let fallback: PendingPublish | undefined
    let match: PendingPublish | undefined
    for (const entry of this.#pending) {
      if (
        entry.seq <= this.#lastReturnedSeq ||
        !entry.mandatory ||
        entry.returnedWith !== undefined ||
        entry.exchange !== exchange ||
        entry.routingKey !== routingKey
      ) {
        continue
      }
      fallback ??= entry
      if (entry.messageId === (messageId ?? undefined) && entry.body.equals(message.content)) {
        match = entry
        break
      }
    }
    const owner = match ?? fallback
    if (owner === undefined) {
      this.#hooks.warn(
        `the broker returned a message (exchange '${exchange || '(default)'}', routing key '${routingKey}', ${replyText}) that matches no outstanding publish`,
      )
      return
    }
    owner.returnedWith = replyText
    this.#lastReturnedSeq = owner.seq
  }
}
