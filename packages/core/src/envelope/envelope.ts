import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { ConfigurationError } from '../errors.js'
import {
  headerInteger,
  headerString,
  type Headers,
  type TypedInteger,
} from '../headers/header-values.js'

// The lenient readers live below the envelope (docs/design.md §1); they are part of this
// module's public face.
export { headerInteger, headerString } from '../headers/header-values.js'

/**
 * The wire names of the envelope headers, shared by every AceMQ library.
 *
 * @example
 * ```ts
 * delivery.headers[ENVELOPE_HEADERS.attempt] // { '!': 'int', value: 2 } or 2
 * ```
 */
export const ENVELOPE_HEADERS = {
  id: 'x-acemq-id',
  type: 'x-acemq-type',
  version: 'x-acemq-version',
  correlation: 'x-acemq-correlation',
  causation: 'x-acemq-causation',
  attempt: 'x-acemq-attempt',
  firstSeen: 'x-acemq-first-seen',
  origin: 'x-acemq-origin',
  error: 'x-acemq-error',
  claim: 'x-acemq-claim',
} as const

/**
 * Headers starting with this belong to AceMQ: they are stripped from application headers on
 * read and refused on write. `acemq-` without the `x-` is an ordinary application header.
 *
 * @example
 * ```ts
 * key.toLowerCase().startsWith(RESERVED_HEADER_PREFIX)
 * ```
 */
export const RESERVED_HEADER_PREFIX = 'x-acemq-'

/**
 * The AceMQ envelope of one message: identity, type, lineage and retry state, carried in
 * `x-acemq-*` headers.
 *
 * @example
 * ```ts
 * async (message) => { if (message.envelope.attempt > 1) log.warn('retrying', message.envelope.id) }
 * ```
 */
export interface Envelope {
  /** The message id and idempotency key; also the AMQP `message-id`. */
  readonly id: string
  /**
   * The logical type; the routing key it was published with unless set (empty, and not
   * written, only when that routing key was empty too).
   */
  readonly type: string
  /** The payload's schema version, at least 1. */
  readonly version: number
  /** Business correlation; the id unless set. */
  readonly correlation: string
  /** The id of the message that caused this one. */
  readonly causation: string | undefined
  /** Which delivery this is, counting from 1 and advanced on every retry. */
  readonly attempt: number
  /** Epoch milliseconds of the first publish; `undefined` when the header was missing or unusable. */
  readonly firstSeen: number | undefined
  /** `service@host` of the first publisher. */
  readonly origin: string | undefined
  /** A pointer to an externalised payload; carried, never acted on. */
  readonly claim: string | undefined
  /** Why this copy was set aside; only present on `.dlq` and `.parked` copies. */
  readonly error: string | undefined
}

/**
 * The envelope fields a publisher may choose; the rest get the defaults of docs/design.md §4.
 *
 * @example
 * ```ts
 * await orders.send(order, { correlation: order.id, causation: incoming.envelope.id })
 * ```
 */
export interface EnvelopeInit {
  readonly id?: string
  readonly type?: string
  readonly version?: number
  readonly correlation?: string
  readonly causation?: string
  readonly origin?: string
  readonly claim?: string
  readonly firstSeen?: number
  readonly attempt?: number
}

// Attempt and version travel as AMQP `int` (signed 32-bit).
const INT32_MAX = 2_147_483_647

// A first-seen before 2000 is not a real publish time but a bug (seconds instead of
// milliseconds, a zero): believing it would make the message look decades old and give up on
// it at once, so it reads as "unknown" instead.
const EARLIEST_PLAUSIBLE_FIRST_SEEN = Date.UTC(2000, 0, 1)
// The largest epoch a JS Date can hold.
const LATEST_PLAUSIBLE_FIRST_SEEN = 8.64e15

/**
 * The origin AceMQ writes when none is given: `acemq@{hostname}`.
 *
 * @example
 * ```ts
 * defaultOrigin() // 'acemq@orders-7f9c'
 * ```
 */
export function defaultOrigin(): string {
  return `acemq@${hostname() || 'localhost'}`
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  return String(value)
}

function checkString(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value === '') {
    throw new ConfigurationError(
      `envelope.${field} must be a non-empty string when given; got ${describe(value)}`,
    )
  }
  return value
}

/** The id is also the AMQP `message-id`, a short string: at most 255 UTF-8 bytes. */
function checkId(value: unknown): string | undefined {
  const id = checkString(value, 'id')
  if (id !== undefined && Buffer.byteLength(id) > MAX_ID_BYTES) {
    throw new ConfigurationError(
      `envelope.id must be at most ${MAX_ID_BYTES} bytes of UTF-8 (it is also the AMQP message-id); got ${Buffer.byteLength(id)} bytes`,
    )
  }
  return id
}

/** The longest id: the AMQP `message-id` property is a short string. */
export const MAX_ID_BYTES = 255

function checkCount(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > INT32_MAX) {
    throw new ConfigurationError(
      `envelope.${field} must be a whole number from 1 to ${INT32_MAX}; got ${describe(value)}`,
    )
  }
  return value
}

function checkEpoch(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new ConfigurationError(
      `envelope.${field} must be epoch milliseconds (a whole, non-negative number); got ${describe(value)}`,
    )
  }
  return value
}

/**
 * Builds the envelope for a new publish, filling what `init` leaves out: a random UUID id,
 * the routing key as type, version 1, the id as correlation, attempt 1, `now` as first-seen
 * and {@link defaultOrigin} as origin. Throws a {@link ConfigurationError} naming the field
 * and value for an empty string, a version or attempt that is not a whole number from 1, or a
 * first-seen that is not epoch milliseconds.
 *
 * @example
 * ```ts
 * const envelope = createEnvelope({ correlation: 'order-1' }, { routingKey: 'orders.placed' })
 * envelope.type // 'orders.placed'
 * ```
 */
export function createEnvelope(
  init: EnvelopeInit | undefined,
  defaults: { readonly routingKey: string; readonly origin?: string; readonly now?: number },
): Envelope {
  const id = checkId(init?.id) ?? randomUUID()
  // A fanout publish may have an empty routing key; its type is then empty and not written.
  const type =
    checkString(init?.type, 'type') ??
    (typeof defaults.routingKey === 'string' ? defaults.routingKey : '')
  return Object.freeze({
    id,
    type,
    version: checkCount(init?.version, 'version') ?? 1,
    correlation: checkString(init?.correlation, 'correlation') ?? id,
    causation: checkString(init?.causation, 'causation'),
    attempt: checkCount(init?.attempt, 'attempt') ?? 1,
    firstSeen:
      checkEpoch(init?.firstSeen, 'firstSeen') ??
      checkEpoch(defaults.now, 'firstSeen (defaults.now)') ??
      Date.now(),
    origin:
      checkString(init?.origin, 'origin') ??
      checkString(defaults.origin, 'origin') ??
      defaultOrigin(),
    claim: checkString(init?.claim, 'claim'),
    error: undefined,
  })
}

function isReserved(key: string): boolean {
  // Case-insensitive so that `X-AceMQ-Id` cannot pose as an application header.
  return key.slice(0, RESERVED_HEADER_PREFIX.length).toLowerCase() === RESERVED_HEADER_PREFIX
}

/** Sets a header as an own property, even one named '__proto__' (which `=` would not create). */
function defineHeader(headers: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(headers, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    })
  } else headers[key] = value
}

function isTable(value: unknown): value is Headers {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function readCount(value: unknown): number | undefined {
  const count = headerInteger(value)
  return count !== undefined && count >= 1 && count <= INT32_MAX ? count : undefined
}

function readFirstSeen(value: unknown): number | undefined {
  const epoch = headerInteger(value)
  return epoch !== undefined &&
    epoch >= EARLIEST_PLAUSIBLE_FIRST_SEEN &&
    epoch <= LATEST_PLAUSIBLE_FIRST_SEEN
    ? epoch
    : undefined
}

/**
 * Reads the envelope from a delivery's headers, and returns it with the application headers
 * (every `x-acemq-*` key removed: known ones became envelope fields, unknown ones vanish).
 *
 * Reading is lenient, because the headers may come from any AceMQ library or from a message
 * published by hand: integers of any width, typed, as `bigint`, as decimal text or bytes;
 * strings as text or UTF-8 bytes. A value that cannot be used falls back to its default
 * rather than throwing — a missing id becomes `messageId` or a new UUID, a missing type the
 * routing key, a missing attempt or version 1, a missing correlation the id, and a missing or
 * implausible first-seen `undefined` (so the message's age counts as 0 instead of 56 years).
 * It never throws.
 *
 * @example
 * ```ts
 * const { envelope, headers } = readEnvelope(delivery.headers, {
 *   messageId: delivery.properties.messageId,
 *   routingKey: delivery.routingKey,
 * })
 * ```
 */
export function readEnvelope(
  headers: Headers | undefined,
  context: { readonly messageId?: string | undefined; readonly routingKey: string },
): { readonly envelope: Envelope; readonly headers: Headers } {
  const source: Headers = isTable(headers) ? headers : {}
  const h = ENVELOPE_HEADERS
  const id = headerString(source[h.id]) ?? headerString(context.messageId) ?? randomUUID()
  const envelope: Envelope = Object.freeze({
    id,
    type:
      headerString(source[h.type]) ??
      (typeof context.routingKey === 'string' ? context.routingKey : ''),
    version: readCount(source[h.version]) ?? 1,
    correlation: headerString(source[h.correlation]) ?? id,
    causation: headerString(source[h.causation]),
    attempt: readCount(source[h.attempt]) ?? 1,
    firstSeen: readFirstSeen(source[h.firstSeen]),
    origin: headerString(source[h.origin]),
    claim: headerString(source[h.claim]),
    error: headerString(source[h.error]),
  })
  // Built in place (it runs on every delivery).
  const application: Record<string, unknown> = {}
  for (const key of Object.keys(source)) {
    if (!isReserved(key)) defineHeader(application, key, source[key])
  }
  return { envelope, headers: application as Headers }
}

/**
 * Refuses application headers that use the reserved `x-acemq-` prefix (in any letter case),
 * so an application can never overwrite or spoof the envelope. Throws a
 * {@link ConfigurationError} that says which header and what to use instead.
 *
 * @example
 * ```ts
 * assertApplicationHeaders({ 'x-acemq-tenant': 'acme' })
 * // throws: header 'x-acemq-tenant' uses the reserved x-acemq- prefix: use your own
 * // namespace (for example 'x-myapp-tenant')
 * ```
 */
export function assertApplicationHeaders(
  headers: Headers | undefined,
  argumentName?: string,
): void {
  if (headers === undefined) return
  const where = argumentName === undefined ? '' : `${argumentName}: `
  if (!isTable(headers)) {
    throw new ConfigurationError(
      `${where}headers must be an object of header names to values; got ${describe(headers)}`,
    )
  }
  for (const key of Object.keys(headers)) {
    if (isReserved(key)) {
      const rest = key.slice(RESERVED_HEADER_PREFIX.length)
      throw new ConfigurationError(
        `${where}header '${key}' uses the reserved x-acemq- prefix: use your own namespace (for example 'x-myapp-${rest}')`,
      )
    }
    // AMQP field names are short strings; a longer one would fail deep inside the client.
    if (Buffer.byteLength(key, 'utf8') > 255) {
      throw new ConfigurationError(
        `${where}header '${key.slice(0, 40)}…' is longer than AMQP's 255-byte limit for a header name`,
      )
    }
  }
}

function requiredString(value: unknown, field: string): string {
  const checked = checkString(value, field)
  if (checked === undefined) {
    throw new ConfigurationError(`envelope.${field} must be a non-empty string; got undefined`)
  }
  return checked
}

// Attempt and version are 1 on nearly every publish: one shared, frozen value for that.
const INT_ONE: TypedInteger = Object.freeze({ '!': 'int', value: 1 })

function int(value: number): TypedInteger {
  return value === 1 ? INT_ONE : { '!': 'int', value }
}

/**
 * Renders an envelope as headers for a publish: the application headers first (refused if
 * any uses the reserved prefix), then the envelope. Attempt and version are written as AMQP
 * `int` and first-seen as `long`, because amqplib would otherwise pick the smallest width and
 * some readers insist on the width. Empty fields are omitted, never written as `""` or null.
 * `x-acemq-error` is written only when `options.error` is given, so a reason never follows a
 * message back out of a dead-letter queue. An attempt beyond 2³¹−1 stays at 2³¹−1, since the
 * wire cannot hold more.
 *
 * @example
 * ```ts
 * const headers = writeEnvelope({ ...envelope, attempt: envelope.attempt + 1 }, appHeaders)
 * const dlq = writeEnvelope(envelope, appHeaders, { error: 'gave up after 5 attempt(s): boom' })
 * ```
 */
export function writeEnvelope(
  envelope: Envelope,
  applicationHeaders?: Headers,
  options?: { readonly error?: string },
): Headers {
  assertApplicationHeaders(applicationHeaders, 'applicationHeaders')
  const attempt =
    typeof envelope.attempt === 'number' && envelope.attempt > INT32_MAX
      ? INT32_MAX
      : envelope.attempt
  const h = ENVELOPE_HEADERS
  // Validated first, then built in place (it runs on every publish): the application headers
  // first, then ours, each envelope header only when it has a value.
  const firstSeen = checkEpoch(envelope.firstSeen, 'firstSeen')
  const id = requiredString(envelope.id, 'id')
  const type = emptyToUndefined(envelope.type, 'type')
  const version = checkCount(envelope.version, 'version') ?? 1
  const correlation = requiredString(envelope.correlation, 'correlation')
  const causation = emptyToUndefined(envelope.causation, 'causation')
  const attemptOnWire = checkCount(attempt, 'attempt') ?? 1
  const origin = emptyToUndefined(envelope.origin, 'origin')
  const claim = emptyToUndefined(envelope.claim, 'claim')
  const error = emptyToUndefined(options?.error, 'error')
  const headers: Record<string, unknown> = {}
  if (applicationHeaders !== undefined) {
    for (const key of Object.keys(applicationHeaders)) {
      const value = applicationHeaders[key]
      if (value !== undefined) defineHeader(headers, key, value)
    }
  }
  headers[h.id] = id
  if (type !== undefined) headers[h.type] = type
  headers[h.version] = int(version)
  headers[h.correlation] = correlation
  if (causation !== undefined) headers[h.causation] = causation
  headers[h.attempt] = int(attemptOnWire)
  if (firstSeen !== undefined) headers[h.firstSeen] = { '!': 'long', value: firstSeen }
  if (origin !== undefined) headers[h.origin] = origin
  if (claim !== undefined) headers[h.claim] = claim
  if (error !== undefined) headers[h.error] = error
  return headers as Headers
}

const ENVELOPE_HEADER_NAMES: ReadonlySet<string> = new Set(Object.values(ENVELOPE_HEADERS))

/**
 * The headers of a copy the engine republishes (a retry, a put-back, a dead-letter or parked
 * copy): every header of the original as it travelled — application headers with their wire
 * types, and `x-acemq-*` headers this library does not know (another AceMQ library's route
 * headers, say) — with the envelope written anew over them. `x-acemq-error` is written only
 * when `options.error` is given, so an old reason never follows a message back out.
 *
 * @example
 * ```ts
 * const headers = writeCopyHeaders(delivery.wireHeaders ?? delivery.headers,
 *   { ...envelope, attempt: envelope.attempt + 1 })
 * ```
 */
export function writeCopyHeaders(
  original: Headers,
  envelope: Envelope,
  options?: { readonly error?: string },
): Headers {
  const written = writeEnvelope(envelope, undefined, options)
  const headers: Record<string, unknown> = {}
  if (isTable(original)) {
    for (const key of Object.keys(original)) {
      // Every envelope header is the engine's to write (in any letter case).
      if (!ENVELOPE_HEADER_NAMES.has(key.toLowerCase())) defineHeader(headers, key, original[key])
    }
  }
  for (const key of Object.keys(written)) defineHeader(headers, key, written[key])
  return headers as Headers
}

// Optional fields treat "" as absent (docs/design.md §4: empty values are omitted), but a non-string is
// still a mistake worth naming.
function emptyToUndefined(value: unknown, field: string): string | undefined {
  return value === '' ? undefined : checkString(value, field)
}

/**
 * How old a message is, in milliseconds since its first publish: 0 when first-seen is unknown
 * or in the future (clocks disagree between hosts), never negative.
 *
 * @example
 * ```ts
 * policy.nextWait(envelope.attempt, envelopeAge(envelope, Date.now()))
 * ```
 */
export function envelopeAge(envelope: Envelope, now: number): number {
  if (envelope.firstSeen === undefined) return 0
  const age = now - envelope.firstSeen
  return age > 0 ? age : 0
}
