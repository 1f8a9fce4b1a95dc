import { randomUUID } from 'node:crypto'
import { CodecRegistry } from '../codec/codec-registry.js'
import { MAX_ID_BYTES, assertApplicationHeaders } from '../envelope/envelope.js'
import { ConfigurationError } from '../errors.js'
import { assertIdempotencyKey } from '../idempotency/store-validation.js'

/** A header value an outbox record can keep: it is stored as JSON and published as it was. */
export type OutboxHeaderValue = string | number | boolean

/**
 * Options of {@link OutboxRecord.of}: the envelope fields and headers of the message to come.
 *
 * @example
 * ```ts
 * OutboxRecord.of('orders', 'order.placed', order, { id: `order-${order.id}`, headers: { 'x-tenant': 'acme' } })
 * ```
 */
export interface OutboxRecordOptions {
  /** The record's id, which becomes the message's envelope id (default: a random UUID). */
  readonly id?: string
  /** The content type to encode the payload with (default `application/json`). */
  readonly contentType?: string
  /** Codecs to encode with (default: JSON, text, bytes). */
  readonly codecs?: CodecRegistry
  /** Application headers (no `x-acemq-*`): strings, numbers and booleans. */
  readonly headers?: Readonly<Record<string, OutboxHeaderValue>>
  /** The envelope's type (default: the routing key). */
  readonly type?: string
  /** The envelope's correlation (default: the id). */
  readonly correlation?: string
  /** The envelope's causation. */
  readonly causation?: string
  /** The payload's schema version (default 1). */
  readonly version?: number
}

/** The envelope fields a record carries to its publish; the rest are the relay's. */
export interface OutboxEnvelope {
  readonly type?: string
  readonly correlation?: string
  readonly causation?: string
  readonly version?: number
}

const CODECS = CodecRegistry.defaults()

/**
 * A message to publish once the transaction that wrote it commits: written by a store's
 * `add(trx, record)` in your own transaction, published later by the relay
 * (`mq.outbox(store)`). The payload is encoded when the record is made, so the store keeps
 * bytes. The record's id is the published message's envelope id: a consumer's idempotency
 * store catches the copy a relay publishes again after dying between the confirm and the mark.
 *
 * @example
 * ```ts
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto('orders').values(order).execute()
 *   await outbox.add(trx, OutboxRecord.of('orders', 'order.placed', order))
 * })
 * ```
 */
export class OutboxRecord {
  readonly id: string
  readonly exchange: string
  readonly routingKey: string
  readonly body: Uint8Array
  readonly contentType: string
  readonly headers: Readonly<Record<string, OutboxHeaderValue>>
  readonly envelope: OutboxEnvelope

  private constructor(init: {
    id: string
    exchange: string
    routingKey: string
    body: Uint8Array
    contentType: string
    headers: Readonly<Record<string, OutboxHeaderValue>>
    envelope: OutboxEnvelope
  }) {
    this.id = init.id
    this.exchange = init.exchange
    this.routingKey = init.routingKey
    this.body = init.body
    this.contentType = init.contentType
    this.headers = init.headers
    this.envelope = init.envelope
    Object.freeze(this)
  }

  /**
   * A record for `payload` to `exchange` with `routingKey` (`''` is the default exchange,
   * which routes to the queue the key names). Throws a `ConfigurationError` naming the
   * argument for a bad id, header, version or a payload the codec cannot encode.
   *
   * @example
   * ```ts
   * const record = OutboxRecord.of('', 'orders.placed', { id: 'o-1' }, { id: 'o-1' })
   * ```
   */
  static of(
    exchange: string,
    routingKey: string,
    payload: unknown,
    options: OutboxRecordOptions = {},
  ): OutboxRecord {
    if (typeof exchange !== 'string' || Buffer.byteLength(exchange) > 255) {
      throw new ConfigurationError(
        `OutboxRecord.of(exchange) must be a string of at most 255 bytes ('' for the default exchange); got ${JSON.stringify(exchange)}`,
      )
    }
    if (typeof routingKey !== 'string' || Buffer.byteLength(routingKey) > 255) {
      throw new ConfigurationError(
        `OutboxRecord.of(routingKey) must be a string of at most 255 bytes; got ${JSON.stringify(routingKey)}`,
      )
    }
    const id = options.id ?? randomUUID()
    assertIdempotencyKey(id)
    if (Buffer.byteLength(id) > MAX_ID_BYTES) {
      throw new ConfigurationError(
        `OutboxRecord.of(options.id) is longer than ${MAX_ID_BYTES} bytes`,
      )
    }
    const codecs = options.codecs ?? CODECS
    const codec = codecs.find(options.contentType)
    if (codec === undefined) {
      throw new ConfigurationError(
        `OutboxRecord.of(options.contentType): no codec is registered for ${JSON.stringify(options.contentType)}`,
      )
    }
    const headers = checkHeaders(options.headers)
    const envelope: OutboxEnvelope = {
      ...(optionalString(options.type, 'type') === undefined ? {} : { type: options.type }),
      ...(optionalString(options.correlation, 'correlation') === undefined
        ? {}
        : { correlation: options.correlation }),
      ...(optionalString(options.causation, 'causation') === undefined
        ? {}
        : { causation: options.causation }),
      ...(options.version === undefined ? {} : { version: checkVersion(options.version) }),
    }
    return new OutboxRecord({
      id,
      exchange,
      routingKey,
      body: codec.encode(payload),
      contentType: codec.contentType,
      headers,
      envelope: Object.freeze(envelope),
    })
  }
}

function checkHeaders(
  headers: Readonly<Record<string, OutboxHeaderValue>> | undefined,
): Readonly<Record<string, OutboxHeaderValue>> {
  if (headers === undefined) return Object.freeze({})
  assertApplicationHeaders(headers, 'OutboxRecord.of(options.headers)')
  const copy: Record<string, OutboxHeaderValue> = {}
  for (const [key, value] of Object.entries(headers)) {
    if (
      typeof value !== 'string' &&
      typeof value !== 'boolean' &&
      !(typeof value === 'number' && Number.isFinite(value))
    ) {
      throw new ConfigurationError(
        `OutboxRecord.of(options.headers): header '${key}' must be a string, a finite number or a boolean (it is stored as JSON); got ${typeof value}`,
      )
    }
    copy[key] = value
  }
  return Object.freeze(copy)
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value === '') {
    throw new ConfigurationError(
      `OutboxRecord.of(options.${field}) must be a non-empty string when given; got ${JSON.stringify(value)}`,
    )
  }
  return value
}

function checkVersion(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 2_147_483_647) {
    throw new ConfigurationError(
      `OutboxRecord.of(options.version) must be a whole number from 1; got ${String(value)}`,
    )
  }
  return value
}
