import type { CodecRegistry } from '../codec/codec-registry.js'
import {
  ENVELOPE_HEADERS,
  headerInteger,
  readEnvelope,
  writeCopyHeaders,
  type Envelope,
} from '../envelope/envelope.js'
import { republishedProperties } from '../consumer/mover.js'
import { AceMqError, ConfigurationError, abortError, describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf, type ErrorCode } from '../error-codes.js'
import { sleep } from '../internal/timers.js'
import { validateQueueName } from '../retry/queue-names.js'
import { QueueReader, type GiveBack } from './queue-reader.js'
import type { Delivery, Headers, Transport } from '../transport/transport.js'

/** The header naming the queue a replayed message came from. */
export const REPLAYED_FROM_HEADER = 'acemq-replayed-from'
/** The header holding when a message was replayed (RFC 3339, UTC, to the second). */
export const REPLAYED_AT_HEADER = 'acemq-replayed-at'
/** The header counting how many times a message was replayed. */
export const REPLAY_COUNT_HEADER = 'acemq-replay-count'
/** The replay count's old name, read and removed on every replay. */
export const LEGACY_REPLAY_COUNT_HEADER = 'x-acemq-replay-count'

/** How long a peek waits for the broker to have its messages back. */
const PEEK_SETTLE_MS = 2_000

/** How many messages a replay takes before it publishes them and waits for their confirms. */
const REPLAY_WINDOW = 100

/** How many of the messages a replay could not write it names in its error. */
const NAMED_FAILURES = 3

/**
 * A replay stopped before it was done: a copy could not be written (the broker refused it, or
 * it can never be encoded), or the connection was lost. Everything not yet moved is on the
 * source; `moved` says how many went before it stopped, `notWritten` the ids of the messages
 * whose copies failed (empty when the connection went between them). The code is the cause's
 * (`ACEMQ_PUBLISH_FAILED`, `ACEMQ_UNENCODABLE`, `ACEMQ_CONNECTION_DOWN`, …).
 *
 * @example
 * ```ts
 * catch (e) { if (e instanceof ReplayStoppedError) console.log(`${e.moved} moved before: ${e.message}`) }
 * ```
 */
export class ReplayStoppedError extends AceMqError {
  constructor(
    readonly source: string,
    readonly target: string,
    readonly moved: number,
    readonly notWritten: readonly string[],
    cause: unknown,
    code: ErrorCode = errorCodeOf(cause) ??
      (cause instanceof AggregateError ? errorCodeOf(cause.errors[0]) : undefined) ??
      ErrorCodes.PUBLISH_FAILED,
  ) {
    super(
      `replay of '${source}' into '${target}' stopped after moving ${moved} message(s): ${stopReason(notWritten, cause)}; every message not moved is still on '${source}'`,
      { code, cause },
    )
  }
}

function stopReason(notWritten: readonly string[], cause: unknown): string {
  if (notWritten.length === 0) return describeError(cause)
  const causes = cause instanceof AggregateError ? cause.errors : [cause]
  const named = notWritten
    .slice(0, NAMED_FAILURES)
    .map((id, i) => `message '${shortId(id)}' could not be written (${describeError(causes[i])})`)
  const more = notWritten.length - named.length
  return `${named.join('; ')}${more > 0 ? `; and ${more} more` : ''}`
}

/** An id as an error names it: a foreign id can be hundreds of bytes long. */
function shortId(id: string): string {
  return id.length > 80 ? `${id.slice(0, 77)}…` : id
}

/**
 * A message waiting in a dead-letter (or parked) queue, as a replay filter or a peek sees it.
 * Nothing is decoded unless asked: {@link ReplayMessage.payload} decodes the body on use.
 */
export interface ReplayMessage {
  /** The envelope: id, type, attempt, first seen, and `error` (why it was set aside). */
  readonly envelope: Envelope
  /** Application headers only (no `x-acemq-*`). */
  readonly headers: Readonly<Headers>
  /** The raw body. */
  readonly body: Uint8Array
  /** The body's content type, as published. */
  readonly contentType: string | undefined
  /** The body decoded by its content type's codec; throws when it cannot be decoded. */
  readonly payload: unknown
  /** How many times it was replayed before (the current or legacy count header, 0 without). */
  readonly replayCount: number
  /**
   * Every header as it arrived, `x-acemq-*` included: a pipeline step's message carries its
   * route there (`readRoute(message.wireHeaders)`).
   */
  readonly wireHeaders: Readonly<Headers>
  /**
   * How many times a quorum queue has had it back before (its `x-delivery-count`), 0 without:
   * RabbitMQ 4.0 to 4.2 count each return toward the queue's delivery limit.
   */
  readonly returns: number
}

/** What a replay reports as it goes. */
export interface ReplayProgress {
  /** Messages republished and removed from the source so far. */
  readonly moved: number
  /** Messages looked at so far (moved, plus those the filter left). */
  readonly scanned: number
  /** Messages that were waiting when the replay started. */
  readonly total: number
}

/** Options of one replay run. */
export interface ReplayRunOptions {
  /** Called after every message looked at. Must not throw. */
  readonly onProgress?: (progress: ReplayProgress) => void
  /** Stops the run between windows; the messages not yet taken stay on the source. */
  readonly signal?: AbortSignal
  /** Told, at the end, how many messages were given back to the source and how. */
  readonly onReturned?: (giveBack: GiveBack) => void
}

/** Options of a peek. */
export interface PeekOptions {
  /**
   * Told how many messages the peek gave back to the queue, and whether it had to take the
   * whole queue round to keep its order (a RabbitMQ 3.x quorum queue). Each is a return: on
   * RabbitMQ 4.0 to 4.2 every return counts toward a quorum queue's delivery limit (20 by
   * default; 4.3 counts a basic.nack no more).
   */
  readonly onReturned?: (giveBack: GiveBack) => void
}

/** What a replay needs from its connection. Internal to core. */
export interface ReplayHost {
  readonly transport: Transport
  readonly codecs: CodecRegistry
  assertOpen(): void
}

/**
 * Sends messages from a dead-letter (or parked) queue back to work. Each message is
 * republished — confirmed and mandatory — before it is removed from the source; one whose
 * publish fails stays on the source and the run rejects. A replayed copy carries
 * `acemq-replayed-from`, `acemq-replayed-at` and `acemq-replay-count`, loses `x-acemq-error`,
 * and starts again at attempt 1 unless {@link Replay.keepingAttempts}. Immutable: every
 * `into`/`keepingAttempts` returns a new replay. Get one from `mq.replay(queue)`.
 *
 * @example
 * ```ts
 * const replay = mq.replay('orders.placed.dlq')   // into 'orders.placed'
 * console.log(await replay.pending())
 * await replay.replay(10, (message) => message.headers['x-tenant'] === 'a')
 * await replay.replayAll()
 * ```
 */
export class Replay {
  /** The queue messages are taken from. */
  readonly source: string
  /**
   * The queue they are sent to: `.into(queue)`, else the source's name without `.dlq` or
   * `.parked`; undefined for another source until `.into` names one (it can still be peeked
   * and counted).
   */
  readonly target: string | undefined
  /** Whether the attempt is kept (true) or restarts at 1 (false, the default). */
  readonly keepsAttempts: boolean
  readonly #host: ReplayHost

  /**
   * Created by `mq.replay()`.
   *
   * @internal
   */
  constructor(host: ReplayHost, source: string, target?: string, keepsAttempts = false) {
    validateQueueName(source, 'replay(queue)')
    const into = target ?? defaultTarget(source)
    if (into !== undefined) validateQueueName(into, 'replay().into(queue)')
    if (into === source) {
      throw new ConfigurationError(
        `replay('${source}').into('${into}'): a queue cannot be replayed into itself`,
      )
    }
    this.#host = host
    this.source = source
    this.target = into
    this.keepsAttempts = keepsAttempts
    Object.freeze(this)
  }

  /**
   * The same replay into another queue.
   *
   * @example
   * ```ts
   * mq.replay('orders.placed.dlq').into('orders.placed.v2')
   * ```
   */
  into(queue: string): Replay {
    return new Replay(this.#host, this.source, queue, this.keepsAttempts)
  }

  /**
   * The same replay, keeping each message's attempt instead of restarting it at 1.
   *
   * @example
   * ```ts
   * mq.replay('orders.placed.dlq').keepingAttempts()
   * ```
   */
  keepingAttempts(): Replay {
    return new Replay(this.#host, this.source, this.target, true)
  }

  /**
   * How many messages wait in the source queue.
   *
   * @example
   * ```ts
   * if ((await replay.pending()) > 0) await replay.replayAll()
   * ```
   */
  async pending(): Promise<number> {
    const transport = this.#transport('queueLength')
    return transport.queueLength(this.source)
  }

  /**
   * Replays every message waiting when it starts; resolves with how many were moved.
   *
   * @example
   * ```ts
   * const moved = await mq.replay('orders.placed.dlq').replayAll()
   * ```
   */
  replayAll(options: ReplayRunOptions = {}): Promise<number> {
    return this.replay(Number.POSITIVE_INFINITY, undefined, options)
  }

  /**
   * Replays at most `max` messages that `filter` accepts (all, without one), looking at each
   * message that was waiting when it starts at most once; resolves with how many were moved.
   * Messages the filter leaves are put back where they were, in order. A failed publish puts
   * back everything not yet moved and rejects.
   *
   * @example
   * ```ts
   * await replay.replay(10, (message) => message.headers['x-tenant'] === 'a')
   * ```
   */
  async replay(
    max: number,
    filter?: (message: ReplayMessage) => boolean,
    options: ReplayRunOptions = {},
  ): Promise<number> {
    if (
      typeof max !== 'number' ||
      Number.isNaN(max) ||
      max < 0 ||
      !(Number.isInteger(max) || max === Infinity)
    ) {
      throw new ConfigurationError(
        `replay(max) must be a whole number of at least 0 (or Infinity); got ${String(max)}`,
      )
    }
    if (filter !== undefined && typeof filter !== 'function') {
      throw new ConfigurationError(`replay(filter) must be a function; got ${String(filter)}`)
    }
    const target = this.target
    if (target === undefined) {
      throw new ConfigurationError(
        `replay('${this.source}'): the queue does not end in .dlq or .parked, so say where its messages go with .into(queue)`,
      )
    }
    const transport = this.#transport('getOne')
    this.#host.assertOpen()
    if (options.signal?.aborted) throw abortError(options.signal)
    // Only the messages waiting now: put-backs and newcomers are not looked at again.
    const total = await transport.queueLength(this.source)
    let moved = 0
    let scanned = 0
    // Holds what the filter left, and copies that failed, until the end: then back in order.
    const reader = new QueueReader(transport, this.source)
    let failed = true
    try {
      while (moved < max && scanned < total) {
        if (options.signal?.aborted) throw abortError(options.signal)
        const window: Delivery[] = []
        let exhausted = false
        while (window.length < REPLAY_WINDOW && moved + window.length < max && scanned < total) {
          const delivery = await reader.next()
          if (delivery === undefined) {
            exhausted = true
            break
          }
          scanned++
          if (filter === undefined || filter(this.#view(delivery))) window.push(delivery)
          else options.onProgress?.({ moved, scanned, total })
        }
        const results = await Promise.allSettled(
          window.map((delivery) =>
            transport.publish(replayCopy(delivery, this.source, target, this.keepsAttempts)),
          ),
        )
        const failures: unknown[] = []
        const notWritten: string[] = []
        results.forEach((result, i) => {
          const delivery = window[i] as Delivery
          if (result.status === 'fulfilled') {
            // Confirmed and routed: only now is the original removed.
            reader.remove(delivery)
            moved++
          } else {
            failures.push(result.reason)
            notWritten.push(this.#idOf(delivery))
          }
        })
        if (window.length > 0) options.onProgress?.({ moved, scanned, total })
        if (failures.length > 0) {
          throw new ReplayStoppedError(
            this.source,
            target,
            moved,
            notWritten,
            failures.length === 1 ? failures[0] : new AggregateError(failures),
          )
        }
        if (exhausted) break
      }
      failed = false
    } catch (error) {
      // The count of what went before is the operator's to know, whatever stopped it.
      if (error instanceof ReplayStoppedError || isAbort(error, options.signal)) throw error
      throw new ReplayStoppedError(this.source, target, moved, [], error)
    } finally {
      await this.#giveBack(reader, failed, options.onReturned)
    }
    return moved
  }

  /**
   * Looks at up to `count` messages at the head of the source queue without removing them:
   * each is taken unacknowledged and given back in its place. On a RabbitMQ 3.x quorum queue,
   * which puts a message given back behind the others, the rest of the queue is taken and
   * given back too, to keep the order; `options.onReturned` hears what that cost.
   *
   * @example
   * ```ts
   * for (const m of await replay.peek(5)) console.log(m.envelope.id, m.envelope.error)
   * ```
   */
  async peek(count: number, options: PeekOptions = {}): Promise<ReplayMessage[]> {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new ConfigurationError(
        `peek(count) must be a whole number of at least 0; got ${String(count)}`,
      )
    }
    const transport = this.#transport('getOne')
    this.#host.assertOpen()
    const before = await transport.queueLength(this.source)
    const reader = new QueueReader(transport, this.source)
    const views: ReplayMessage[] = []
    let failed = true
    try {
      while (views.length < count) {
        const delivery = await reader.next()
        if (delivery === undefined) break
        views.push(this.#view(delivery))
      }
      failed = false
      return views
    } finally {
      await this.#giveBack(reader, failed, options.onReturned)
      // A broker takes put-backs in its own time: answer once they are back (or after 2 s, if
      // another consumer is taking messages meanwhile), so a count right after sees them.
      if (views.length > 0 && !failed) await this.#whenBack(transport, before)
    }
  }

  /** Gives back what `reader` holds; when the run failed already, its error is the one to see. */
  async #giveBack(
    reader: QueueReader,
    failed: boolean,
    onReturned: ((giveBack: GiveBack) => void) | undefined,
  ): Promise<void> {
    try {
      const giveBack = await reader.giveBack()
      onReturned?.(giveBack)
    } catch (error) {
      // Whatever was not given back goes back when its channel closes, in some order.
      if (!failed) throw error
    }
  }

  async #whenBack(
    transport: Required<Pick<Transport, 'queueLength'>>,
    length: number,
  ): Promise<void> {
    const deadline = Date.now() + PEEK_SETTLE_MS
    while (Date.now() < deadline) {
      if ((await transport.queueLength(this.source)) >= length) return
      await sleep(10)
    }
  }

  #transport<K extends 'getOne' | 'queueLength'>(
    operation: K,
  ): Transport & Required<Pick<Transport, 'getOne' | 'queueLength'>> {
    const transport = this.#host.transport
    if (typeof transport.getOne !== 'function' || typeof transport.queueLength !== 'function') {
      throw new AceMqError(
        `the ${transport.kind} transport cannot ${operation === 'getOne' ? 'take messages one by one' : 'count a queue'}, so it cannot replay`,
        { code: ErrorCodes.UNSUPPORTED },
      )
    }
    return transport as Transport & Required<Pick<Transport, 'getOne' | 'queueLength'>>
  }

  #view(delivery: Delivery): ReplayMessage {
    const { envelope, headers } = readEnvelope(delivery.headers, {
      messageId: delivery.properties.messageId,
      routingKey: delivery.routingKey,
    })
    const codecs = this.#host.codecs
    const contentType = delivery.properties.contentType
    return {
      envelope,
      headers,
      body: delivery.body,
      contentType,
      replayCount: replayCountOf(delivery.headers),
      wireHeaders: delivery.wireHeaders ?? delivery.headers,
      returns: Math.max(0, headerInteger(delivery.headers['x-delivery-count']) ?? 0),
      get payload(): unknown {
        const codec = codecs.find(contentType)
        if (codec === undefined) {
          throw new ConfigurationError(`no codec is registered for ${JSON.stringify(contentType)}`)
        }
        return codec.decode(delivery.body)
      },
    }
  }

  #idOf(delivery: Delivery): string {
    return readEnvelope(delivery.headers, {
      messageId: delivery.properties.messageId,
      routingKey: delivery.routingKey,
    }).envelope.id
  }
}

function isAbort(error: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && error instanceof Error && error.name === 'AbortError'
}

/** `orders.placed.dlq` → `orders.placed`; `orders.placed.parked` → `orders.placed`. */
function defaultTarget(source: string): string | undefined {
  for (const suffix of ['.dlq', '.parked']) {
    if (source.endsWith(suffix) && source.length > suffix.length) {
      return source.slice(0, -suffix.length)
    }
  }
  return undefined
}

/** The replay count a message carries: the current header, else the legacy one, else 0. */
function replayCountOf(headers: Headers): number {
  let current: number | undefined
  let legacy: number | undefined
  for (const key of Object.keys(headers)) {
    const lower = key.toLowerCase()
    if (lower === REPLAY_COUNT_HEADER) current = headerInteger(headers[key])
    else if (lower === LEGACY_REPLAY_COUNT_HEADER) legacy = headerInteger(headers[key])
  }
  const count = current ?? legacy ?? 0
  return Number.isSafeInteger(count) && count > 0 ? count : 0
}

/** `2026-12-03T08:15:42Z`: RFC 3339, UTC, to the second. */
export function rfc3339Seconds(date: Date): string {
  return `${date.toISOString().slice(0, 19)}Z`
}

/** What a replayed copy is made from: a delivery, or a message kept in a dead-letter archive. */
export type ReplaySource = Pick<
  Delivery,
  'body' | 'headers' | 'wireHeaders' | 'properties' | 'routingKey'
>

/**
 * The copy of `message` (taken from `source`) that a replay publishes to `target`: confirmed,
 * mandatory, persistent, its headers as they travelled with the replay headers written anew,
 * `x-acemq-error` and `user-id` gone, attempt 1 unless `keepsAttempts` (docs/design.md §18).
 * Internal to core: the replay and the dead-letter archive make their copies alike.
 */
export function replayCopy(
  message: ReplaySource,
  source: string,
  target: string,
  keepsAttempts: boolean,
): Parameters<Transport['publish']>[0] {
  const delivery = message
  const original = delivery.wireHeaders ?? delivery.headers
  const { envelope } = readEnvelope(delivery.headers, {
    messageId: delivery.properties.messageId,
    routingKey: delivery.routingKey,
  })
  const count = replayCountOf(delivery.headers) + 1
  const headers = writeCopyHeaders(original, {
    ...envelope,
    attempt: keepsAttempts ? envelope.attempt : 1,
  }) as Record<string, unknown>
  // Written anew below, in any letter case the original had them.
  for (const key of Object.keys(headers)) {
    const lower = key.toLowerCase()
    if (
      lower === LEGACY_REPLAY_COUNT_HEADER ||
      lower === REPLAY_COUNT_HEADER ||
      lower === REPLAYED_FROM_HEADER ||
      lower === REPLAYED_AT_HEADER ||
      lower === ENVELOPE_HEADERS.error
    ) {
      delete headers[key]
    }
  }
  headers[REPLAYED_FROM_HEADER] = source
  headers[REPLAYED_AT_HEADER] = rfc3339Seconds(new Date())
  headers[REPLAY_COUNT_HEADER] = { '!': 'int', value: count }
  return {
    exchange: '',
    routingKey: target,
    body: delivery.body,
    headers,
    // As every other copy: no user-id (the broker checks it against this connection's user)
    // and no expiration; the id is the message-id only when it fits (docs/design.md §18).
    properties: republishedProperties(delivery.properties, envelope.id),
    persistent: true,
    mandatory: true,
  }
}
