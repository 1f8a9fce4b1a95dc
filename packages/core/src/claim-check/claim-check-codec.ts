import { randomUUID } from 'node:crypto'
import { toMillis, type Duration } from '../duration.js'
import { AceMqError, ConfigurationError, describeError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import type { Codec } from '../codec/codec.js'
import type { ClaimCheckStore } from './claim-check-store.js'

/** Bodies of this many bytes or more go to the store (the family's threshold: 64 KiB). */
export const DEFAULT_CLAIM_CHECK_THRESHOLD = 65_536
/** How long a stored body is kept after its publish: 30 days (docs/design.md §26). */
export const DEFAULT_CLAIM_CHECK_RETENTION = '30d'

const MAGIC = 0xac
const VERSION = 0x01
const INLINE = 0x00
const REFERENCE = 0x01

/** Options of {@link claimCheckCodec}. */
export interface ClaimCheckCodecOptions<T> {
  /** The codec of the payload itself. */
  readonly inner: Codec<T>
  /** Where bodies of `threshold` bytes or more go. */
  readonly store: ClaimCheckStore
  /** The size from which a body goes to the store (default 64 KiB). */
  readonly threshold?: number
  /**
   * How long a stored body is kept after its publish (default 30 days): keep it longer than a
   * message may sit in `{queue}.dlq` before it is replayed.
   */
  readonly retention?: Duration
}

function decodeError(message: string, cause?: unknown): AceMqError {
  return new AceMqError(message, { code: ErrorCodes.DECODE, cause })
}

/**
 * A codec around `inner` that moves bodies of 64 KiB or more to a {@link ClaimCheckStore} and
 * sends a reference instead, in the family's framing: `0xAC 0x01 0x00` then the body inline,
 * `0xAC 0x01 0x01` then the key (UTF-8). The content type is `inner`'s. Storing and fetching
 * are asynchronous, so the publisher and the consumer use `encodeAsync` and `decodeAsync`; the
 * synchronous `encode` (outbox records, pipeline hops) refuses a body that would need the store,
 * and `decode` refuses a reference. A body without the framing is handed to `inner` as it is.
 *
 * Nothing is deleted when a message is acked, dead-lettered or replayed: copies of a message
 * (retries, the `.dlq` copy, a replay) all point at the same body, so bodies are removed only
 * once the retention has passed, by `store.purgeExpired()` (docs/design.md §26). A reference
 * whose body is gone is parked, naming the key; a store that fails is retried.
 *
 * @example
 * ```ts
 * const store = new FileClaimCheckStore('/mnt/shared/claim-checks')
 * const codecs = CodecRegistry.defaults().with(claimCheckCodec({ inner: jsonCodec, store }))
 * ```
 */
export function claimCheckCodec<T>(options: ClaimCheckCodecOptions<T>): Codec<T> {
  const { inner, store } = options ?? ({} as Partial<ClaimCheckCodecOptions<T>>)
  if (typeof inner?.encode !== 'function' || typeof inner.decode !== 'function') {
    throw new ConfigurationError(
      `claimCheckCodec(options.inner) must be a codec with encode and decode; got ${String(inner)}`,
    )
  }
  const methods = ['put', 'get', 'delete', 'purgeExpired'] as const
  if (
    typeof store !== 'object' ||
    store === null ||
    methods.some((m) => typeof store[m] !== 'function')
  ) {
    throw new ConfigurationError(
      `claimCheckCodec(options.store) must implement put, get, delete and purgeExpired; got ${String(store)}`,
    )
  }
  const threshold = options.threshold ?? DEFAULT_CLAIM_CHECK_THRESHOLD
  if (!Number.isInteger(threshold) || threshold < 1) {
    throw new ConfigurationError(
      `claimCheckCodec(options.threshold) must be a whole number of bytes from 1; got ${String(threshold)}`,
    )
  }
  const retentionMs = toMillis(
    options.retention ?? DEFAULT_CLAIM_CHECK_RETENTION,
    'claimCheckCodec(options.retention)',
  )

  function framed(kind: number, rest: Uint8Array): Uint8Array {
    return Buffer.concat([Buffer.from([MAGIC, VERSION, kind]), rest])
  }

  function inline(value: T): { readonly body: Uint8Array; readonly large: boolean } {
    const body = inner.encode(value)
    return { body, large: body.length >= threshold }
  }

  /** The key of a reference, the inline body, or `undefined` for a body without the framing. */
  function read(body: Uint8Array): { key: string } | { inline: Uint8Array } | undefined {
    if (body.length < 2 || body[0] !== MAGIC || body[1] !== VERSION) return undefined
    const kind = body[2]
    const rest = body.subarray(3)
    if (kind === INLINE) return { inline: rest }
    if (kind === REFERENCE) {
      if (rest.length === 0) throw decodeError('the claim-check reference has no key')
      return { key: Buffer.from(rest).toString('utf8') }
    }
    throw decodeError(
      `the claim-check body has kind ${kind === undefined ? 'nothing' : `0x${kind.toString(16).padStart(2, '0')}`}, neither inline (0x00) nor a reference (0x01)`,
    )
  }

  return Object.freeze({
    contentType: inner.contentType,
    encode(value: T): Uint8Array {
      const { body, large } = inline(value)
      if (large) {
        throw new ConfigurationError(
          `a ${body.length}-byte body needs the claim-check store, which only an asynchronous publish can reach (publisher.send); outbox records and pipeline hops carry bodies under ${threshold} bytes`,
        )
      }
      return framed(INLINE, body)
    },
    async encodeAsync(value: T): Promise<Uint8Array> {
      const { body, large } = inline(value)
      if (!large) return framed(INLINE, body)
      const key = randomUUID()
      await store.put(key, body, Date.now() + retentionMs)
      return framed(REFERENCE, Buffer.from(key, 'utf8'))
    },
    decode(body: Uint8Array): T {
      const frame = read(body)
      if (frame === undefined) return inner.decode(body)
      if ('inline' in frame) return inner.decode(frame.inline)
      throw decodeError(
        `the body is a claim-check reference ('${frame.key}'), which only an asynchronous decode can fetch`,
      )
    },
    async decodeAsync(body: Uint8Array): Promise<T> {
      const frame = read(body)
      if (frame === undefined) return inner.decode(body)
      if ('inline' in frame) return inner.decode(frame.inline)
      let stored: Uint8Array | undefined
      try {
        stored = await store.get(frame.key)
      } catch (error) {
        // Not a decode failure: the store may answer on the next attempt, so this is retried.
        throw new AceMqError(
          `the claim-check store failed to return '${frame.key}': ${describeError(error)}`,
          { code: ErrorCodes.ERROR, cause: error },
        )
      }
      if (stored === undefined) {
        throw decodeError(
          `the claim-check key '${frame.key}' is not in the store: its body was purged (kept ${options.retention ?? DEFAULT_CLAIM_CHECK_RETENTION} after publish) or never stored`,
        )
      }
      return inner.decode(stored)
    },
  })
}
