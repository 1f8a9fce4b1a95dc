import { ConfigurationError } from '../errors.js'
import { toMillis, type Duration } from '../duration.js'

/**
 * What a handler may return instead of plainly returning (accept) or throwing (retry).
 * Build one with {@link Ack}: only results made by `Ack` count (see {@link isAckResult}); any
 * other return value, whatever its shape, accepts the message.
 */
export type AckResult =
  | { readonly kind: 'accept' }
  | { readonly kind: 'retry'; readonly reason: string; readonly delayMs: number | undefined }
  | { readonly kind: 'dead-letter'; readonly reason: string }
  | { readonly kind: 'park'; readonly reason: string }
  | { readonly kind: 'release' }

// Results made by `Ack` carry this brand, so a handler's own return value (an ORM row with a
// `kind` column, say) is never read as an instruction. It is a registered symbol so that two
// installed copies of @acemq/core recognise each other's results. Non-enumerable: it stays out
// of the result's keys, its JSON and its equality in tests.
const ACK_BRAND = Symbol.for('acemq.ack')

function branded(result: AckResult): AckResult {
  Object.defineProperty(result, ACK_BRAND, { value: ACK_BRAND })
  return Object.freeze(result)
}

const ACCEPT: AckResult = branded({ kind: 'accept' })
const RELEASE: AckResult = branded({ kind: 'release' })

function reasonOf(reason: unknown, method: string): string {
  if (typeof reason !== 'string' || reason.trim() === '') {
    throw new ConfigurationError(
      `Ack.${method}(reason): reason must be a non-empty string; got ${JSON.stringify(reason)}`,
    )
  }
  return reason
}

/**
 * The results a handler can return to say what should happen to its message.
 *
 * @example
 * ```ts
 * async (message) => {
 *   if (!message.payload.sku) return Ack.park('no sku: a person should look at it')
 *   if (await inventory.busy()) return Ack.retry('inventory busy', '2s')
 *   return Ack.accept()
 * }
 * ```
 */
export const Ack = Object.freeze({
  /** Done: the message is acked (outcome `acked`). Returning nothing means the same. */
  accept(): AckResult {
    return ACCEPT
  },
  /**
   * Try again later, like throwing. With a retry policy the policy decides the delay (and
   * when to give up); without one, `delay` (default: the consumer's retry delay) is used.
   */
  retry(reason: string, delay?: Duration): AckResult {
    return branded({
      kind: 'retry',
      reason: reasonOf(reason, 'retry'),
      delayMs: delay === undefined ? undefined : toMillis(delay, 'Ack.retry(delay)'),
    })
  },
  /** Never retry: the message moves to `{queue}.dlq` with `reason` (outcome `rejected`). */
  deadLetter(reason: string): AckResult {
    return branded({ kind: 'dead-letter', reason: reasonOf(reason, 'deadLetter') })
  },
  /** Set aside for a person: the message moves to `{queue}.parked` (outcome `parked`). */
  park(reason: string): AckResult {
    return branded({ kind: 'park', reason: reasonOf(reason, 'park') })
  },
  /** Hand the message back to the broker as it is (nack with requeue, attempt unchanged). */
  release(): AckResult {
    return RELEASE
  },
})

/**
 * Whether a handler's return value is an {@link AckResult} made by {@link Ack} (by this or any
 * other installed copy of `@acemq/core`). Anything else a handler returns, even an object with
 * a `kind` field such as `{ kind: 'release' }`, is not one, and the message is accepted.
 *
 * @example
 * ```ts
 * isAckResult(Ack.park('look'))      // true
 * isAckResult({ kind: 'release' })   // false: a plain object, so the message is accepted
 * ```
 */
export function isAckResult(value: unknown): value is AckResult {
  if (typeof value !== 'object' || value === null) return false
  if ((value as { [ACK_BRAND]?: unknown })[ACK_BRAND] !== ACK_BRAND) return false
  const kind = (value as { kind?: unknown }).kind
  return (
    kind === 'accept' ||
    kind === 'retry' ||
    kind === 'dead-letter' ||
    kind === 'park' ||
    kind === 'release'
  )
}
