import { createHash, randomUUID } from 'node:crypto'
import { ENVELOPE_HEADERS, headerInteger, readEnvelope } from '../envelope/envelope.js'
import { AceMqError, ConfigurationError, describeError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { validateQueueName } from '../retry/queue-names.js'
import { replayCopy, type ReplaySource } from '../replay/replay.js'
import type {
  Delivery,
  Headers,
  MessageProperties,
  Transport,
  TransportSubscription,
} from '../transport/transport.js'
import type {
  ArchiveAuditEntry,
  ArchiveFilter,
  ArchivePage,
  ArchivedMessage,
  DeadLetterArchiveStore,
} from './archive-store.js'
import { decodeWireJson, encodeWireJson } from './wire-json.js'

/** Deliveries a collector holds unacknowledged per queue. */
export const DEFAULT_ARCHIVE_PREFETCH = 20

/** How long a collector waits before handing back a message it could not keep. */
export const DEFAULT_ARCHIVE_RETRY_DELAY_MS = 1_000

/** Options of {@link DeadLetterArchive}. */
export interface DeadLetterArchiveOptions {
  readonly transport: Transport
  readonly store: DeadLetterArchiveStore
  /** Epoch ms (default `Date.now`). */
  readonly now?: () => number
}

/** What an operator action did. */
export interface ArchiveActionResult {
  /** Messages replayed or discarded. */
  readonly changed: number
  /** Ids not found, or already replayed or discarded: nothing was done with them. */
  readonly skipped: readonly string[]
}

/** Who acts, and for a replay where to. */
export interface ArchiveActionOptions {
  /** The operator, as the audit log names them. Required. */
  readonly actor: string
  /** Replays only: the queue to send to instead of the source's name without `.dlq`/`.parked`. */
  readonly into?: string
}

/** A running collector: {@link ArchiveCollector.close} stops it. */
export interface ArchiveCollector {
  /** Messages kept so far (a redelivered one already kept is acked and not counted). */
  readonly archived: number
  close(): Promise<void>
}

/** A replay from the archive stopped: its publish failed; the message stays `archived`. */
export class ArchiveReplayError extends AceMqError {
  constructor(
    message: string,
    /** Replayed before it stopped. */
    readonly changed: number,
    options: { readonly cause?: unknown } = {},
  ) {
    super(message, { code: ErrorCodes.PUBLISH_FAILED, ...options })
  }
}

/**
 * An opt-in dead-letter archive (docs/design.md §27): a collector takes messages off `.dlq` and
 * `.parked` queues into a {@link DeadLetterArchiveStore}, acking each only once its row is
 * committed, with every header and property kept as it travelled; operators then query it and
 * replay (published confirmed, then marked — never removed first), discard (a tombstone), or
 * edit and replay, one message or many, each action written to an audit log.
 *
 * @example
 * ```ts
 * const archive = new DeadLetterArchive({ transport: mq.transport, store })
 * const collector = await archive.collect(['orders.placed.dlq'])
 * const page = await archive.find({ reason: 'timeout' })
 * await archive.replay(page.messages.map((m) => m.id), { actor: 'ana' })
 * ```
 */
export class DeadLetterArchive {
  readonly #transport: Transport
  readonly #store: DeadLetterArchiveStore
  readonly #now: () => number

  constructor(options: DeadLetterArchiveOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ConfigurationError(`options must be an object; got ${String(options)}`)
    }
    if (typeof options.transport?.consume !== 'function') {
      throw new ConfigurationError(
        `options.transport must be a Transport; got ${String(options.transport)}`,
      )
    }
    if (typeof options.store?.add !== 'function') {
      throw new ConfigurationError(
        `options.store must be a DeadLetterArchiveStore; got ${String(options.store)}`,
      )
    }
    this.#transport = options.transport
    this.#store = options.store
    this.#now = options.now ?? Date.now
  }

  /**
   * Starts taking messages off `queues` (each must end in `.dlq` or `.parked`). Each is acked
   * only after its row is committed; one the store could not keep is handed back after
   * {@link DEFAULT_ARCHIVE_RETRY_DELAY_MS} and `onError` is told. In the archive, a queue's
   * order and delivery limit no longer matter.
   */
  async collect(
    queues: readonly string[],
    options: { readonly prefetch?: number; readonly onError?: (error: unknown) => void } = {},
  ): Promise<ArchiveCollector> {
    for (const queue of queues) {
      validateQueueName(queue, 'queues')
      if (!/\.(dlq|parked)$/.test(queue)) {
        throw new ConfigurationError(`queues: '${queue}' is no .dlq or .parked queue`)
      }
    }
    const prefetch = options.prefetch ?? DEFAULT_ARCHIVE_PREFETCH
    let archived = 0
    let closed = false
    const subscriptions: TransportSubscription[] = []
    const keep = async (queue: string, delivery: Delivery): Promise<void> => {
      try {
        if (await this.#store.add(this.#archived(queue, delivery))) archived++
        delivery.ack()
      } catch (error) {
        options.onError?.(error)
        const timer = setTimeout(
          () => delivery.nack(true),
          closed ? 0 : DEFAULT_ARCHIVE_RETRY_DELAY_MS,
        )
        timer.unref?.()
      }
    }
    try {
      for (const queue of queues) {
        subscriptions.push(
          await this.#transport.consume(
            queue,
            { prefetch },
            (delivery) => void keep(queue, delivery),
          ),
        )
      }
    } catch (error) {
      await Promise.allSettled(subscriptions.map((s) => s.close()))
      throw error
    }
    return {
      get archived() {
        return archived
      },
      async close() {
        closed = true
        await Promise.allSettled(subscriptions.map((s) => s.cancel()))
        await Promise.allSettled(subscriptions.map((s) => s.close()))
      },
    }
  }

  /** A page of archived messages, newest first (see {@link ArchiveFilter}). */
  find(filter: ArchiveFilter = {}): Promise<ArchivePage> {
    return this.#store.find(filter)
  }

  /** One archived message by its archive id. */
  get(id: string): Promise<ArchivedMessage | undefined> {
    return this.#store.get(id)
  }

  /** The audit log, newest first. */
  auditLog(options: { readonly limit?: number } = {}): Promise<ArchiveAuditEntry[]> {
    return this.#store.auditLog(options)
  }

  /**
   * Sends each of `ids` back — to its source queue (the name without `.dlq`/`.parked`) or
   * `options.into` — confirmed and mandatory, as `acemq dlq replay` copies it (attempt 1,
   * replay headers written, the reason dropped), and only then marks it `replayed`. A failed
   * publish stops the batch with an {@link ArchiveReplayError}; that message and the rest stay
   * `archived`. The audit log says who, how many and where, whatever happened.
   */
  replay(ids: readonly string[], options: ArchiveActionOptions): Promise<ArchiveActionResult> {
    return this.#send('replay', ids, options, undefined)
  }

  /**
   * Replays one message with `body` as its payload, under the same envelope id (so an
   * idempotent consumer still handles it once) unless `newId`; every header and property
   * otherwise as {@link DeadLetterArchive.replay} sends it.
   */
  editAndReplay(
    id: string,
    body: Uint8Array,
    options: ArchiveActionOptions & { readonly newId?: boolean },
  ): Promise<ArchiveActionResult> {
    if (!(body instanceof Uint8Array)) {
      throw new ConfigurationError(`body must be bytes (a Uint8Array); got ${typeof body}`)
    }
    return this.#send('edit-and-replay', [id], options, { body, newId: options.newId === true })
  }

  /** Marks `ids` discarded: kept as tombstones until {@link DeadLetterArchive.purge}. */
  async discard(
    ids: readonly string[],
    options: ArchiveActionOptions,
  ): Promise<ArchiveActionResult> {
    const actor = checkActor(options.actor)
    const skipped: string[] = []
    const open: string[] = []
    for (const id of checkIds(ids)) {
      const message = await this.#store.get(id)
      if (message?.status === 'archived') open.push(id)
      else skipped.push(id)
    }
    const changed =
      open.length === 0
        ? 0
        : await this.#store.mark(open, { status: 'discarded', at: this.#now(), by: actor })
    await this.#audit(actor, 'discard', changed, ids, '')
    return { changed, skipped }
  }

  /** Deletes messages replayed or discarded more than `retentionMs` ago; audited. */
  async purge(retentionMs: number, options: { readonly actor: string }): Promise<number> {
    const actor = checkActor(options.actor)
    if (!Number.isSafeInteger(retentionMs) || retentionMs < 0) {
      throw new ConfigurationError(
        `retentionMs must be a whole number of ms; got ${String(retentionMs)}`,
      )
    }
    const purged = await this.#store.purge(this.#now() - retentionMs)
    await this.#audit(actor, 'purge', purged, [], `older than ${retentionMs} ms`)
    return purged
  }

  async #send(
    action: string,
    ids: readonly string[],
    options: ArchiveActionOptions,
    edit: { readonly body: Uint8Array; readonly newId: boolean } | undefined,
  ): Promise<ArchiveActionResult> {
    const actor = checkActor(options.actor)
    if (options.into !== undefined) validateQueueName(options.into, 'into')
    let changed = 0
    const skipped: string[] = []
    const targets = new Set<string>()
    try {
      for (const id of checkIds(ids)) {
        const message = await this.#store.get(id)
        if (message === undefined || message.status !== 'archived') {
          skipped.push(id)
          continue
        }
        const target = options.into ?? sourceOf(message.queue)
        const copy = replayCopy(replaySource(message), message.queue, target, false)
        let publish = copy
        if (edit !== undefined) {
          const newId = edit.newId ? randomUUID() : undefined
          publish = {
            ...copy,
            body: edit.body,
            ...(newId === undefined
              ? {}
              : {
                  headers: { ...copy.headers, [ENVELOPE_HEADERS.id]: newId },
                  properties: { ...copy.properties, messageId: newId },
                }),
          }
        }
        try {
          await this.#transport.publish(publish)
        } catch (error) {
          throw new ArchiveReplayError(
            `the copy of ${id} to '${target}' was not confirmed (${describeError(error)}): it stays archived; ${changed} replayed before`,
            changed,
            { cause: error },
          )
        }
        // Marked only once the copy is confirmed; a mark that fails leaves it archived, and a
        // second replay sends it again under the same envelope id.
        changed += await this.#store.mark([id], {
          status: 'replayed',
          at: this.#now(),
          by: actor,
          replayedTo: target,
        })
        targets.add(target)
      }
    } catch (error) {
      await this.#audit(actor, action, changed, ids, `stopped: ${describeError(error)}`)
      throw error
    }
    await this.#audit(
      actor,
      action,
      changed,
      ids,
      targets.size === 0 ? '' : `to ${[...targets].join(', ')}`,
    )
    return { changed, skipped }
  }

  async #audit(
    actor: string,
    action: string,
    count: number,
    ids: readonly string[],
    detail: string,
  ): Promise<void> {
    const at = this.#now()
    // Sortable within a millisecond: the log lists actions of one instant in their order.
    auditSequence = (auditSequence + 1) % 1e9
    await this.#store.audit({
      id: `${String(at).padStart(15, '0')}-${String(auditSequence).padStart(9, '0')}-${randomUUID().slice(0, 8)}`,
      at,
      actor,
      action,
      count,
      ids: [...ids],
      detail,
    })
  }

  #archived(queue: string, delivery: Delivery): ArchivedMessage {
    const wire = delivery.wireHeaders ?? delivery.headers
    const { envelope } = readEnvelope(delivery.headers, {
      messageId: delivery.properties.messageId,
      routingKey: delivery.routingKey,
    })
    const replayCount = headerInteger(delivery.headers['acemq-replay-count']) ?? 0
    const traceparent = delivery.headers['traceparent']
    return {
      id: randomUUID(),
      key: createHash('sha256')
        .update([queue, envelope.id, String(replayCount), String(envelope.attempt)].join('\n'))
        .digest('hex'),
      queue,
      messageId: envelope.id,
      messageType: envelope.type,
      reason: envelope.error ?? '',
      attempt: envelope.attempt,
      firstSeen: envelope.firstSeen,
      archivedAt: this.#now(),
      correlationId: envelope.correlation,
      traceparent: typeof traceparent === 'string' ? traceparent : undefined,
      exchange: delivery.exchange,
      routingKey: delivery.routingKey,
      body: delivery.body,
      headers: encodeWireJson(wire),
      properties: encodeWireJson(delivery.properties),
      status: 'archived',
      statusAt: undefined,
      statusBy: undefined,
      replayedTo: undefined,
    }
  }
}

/** Orders audit entries written in the same millisecond by this process. */
let auditSequence = 0

/** An archived message as a replay reads it: its headers and properties as they travelled. */
function replaySource(message: ArchivedMessage): ReplaySource {
  const headers = decodeWireJson(message.headers) as Headers
  return {
    body: message.body,
    headers,
    wireHeaders: headers,
    properties: decodeWireJson(message.properties) as MessageProperties,
    routingKey: message.routingKey,
  }
}

/** `orders.placed.dlq` → `orders.placed`. */
function sourceOf(queue: string): string {
  return queue.replace(/\.(dlq|parked)$/, '')
}

function checkActor(actor: unknown): string {
  if (typeof actor !== 'string' || actor.trim() === '') {
    throw new ConfigurationError(`actor must name who acts; got ${JSON.stringify(actor)}`)
  }
  return actor
}

function checkIds(ids: readonly string[]): readonly string[] {
  if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string')) {
    throw new ConfigurationError(`ids must be a list of archive ids; got ${String(ids)}`)
  }
  return ids
}
