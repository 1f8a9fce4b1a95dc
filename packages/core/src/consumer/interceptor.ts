import type { Envelope } from '../envelope/envelope.js'
import { ConfigurationError } from '../errors.js'
import type { Headers } from '../transport/transport.js'
import type { AckResult } from './ack.js'
import type { Message } from './message.js'

/** What `beforeHandle` may answer: nothing to let the message through, or a refusal. */
export type BeforeHandleResult = void | undefined | { readonly refuse: string }

/**
 * Runs around every handler of the consumers it is given to (docs/design.md §22). In each phase
 * the interceptors run one after the other in ascending `order`.
 *
 * - `beforeHandle` may refuse the message (`{ refuse: reason }`): it moves to `{queue}.dlq` with
 *   `x-acemq-error` = `an interceptor refused it: {reason}`, outcome `refused`, and the handler
 *   does not run. A throw refuses it the same way, with the error's message. It is never requeued.
 * - `afterHandle` sees the handler's `Ack` (a throw is seen as the retry or dead-letter it
 *   becomes) and may return another one in its place.
 * - `onError` is told when the handler threw.
 *
 * A throw in `afterHandle` or `onError` is reported (`onError` of the connection,
 * `acemq.interceptor.failed`) and changes nothing.
 *
 * @example
 * ```ts
 * mq.intercept({
 *   order: 10,
 *   beforeHandle: (message) =>
 *     message.headers['x-tenant'] === 'acme' ? undefined : { refuse: 'unknown tenant' },
 * })
 * ```
 */
export interface ConsumeInterceptor {
  /** Where it runs among the others: lower first (default 0); equal ones run as registered. */
  readonly order?: number
  /** Its name in reports (default `interceptor`). */
  readonly name?: string
  beforeHandle?(message: Message<unknown>): BeforeHandleResult | Promise<BeforeHandleResult>
  afterHandle?(
    message: Message<unknown>,
    ack: AckResult,
  ): AckResult | void | undefined | Promise<AckResult | void | undefined>
  onError?(message: Message<unknown>, error: unknown): void | Promise<void>
}

/** One publish as publish interceptors see it: the envelope and the application headers. */
export interface OutgoingPublish {
  readonly exchange: string
  readonly routingKey: string
  readonly envelope: Envelope
  /** Application headers (no `x-acemq-*`). */
  readonly headers: Readonly<Headers>
}

/** What `beforePublish` may replace: the envelope and the application headers, not the body. */
export type PublishChanges =
  | void
  | undefined
  | {
      readonly envelope?: Envelope
      readonly headers?: Headers
    }

/**
 * Runs around every publish of the publishers of a connection (docs/design.md §22), in ascending
 * `order`. `beforePublish` may replace the envelope and the application headers (never the
 * encoded body); a throw there rejects the send before anything is written. `afterConfirm` runs
 * once the broker confirmed the message, `onPublishError` when the publish failed; a throw in
 * either is reported and changes nothing.
 *
 * @example
 * ```ts
 * mq.intercept({
 *   beforePublish: (publish) => ({ headers: { ...publish.headers, 'x-service': 'billing' } }),
 * })
 * ```
 */
export interface PublishInterceptor {
  readonly order?: number
  readonly name?: string
  beforePublish?(publish: OutgoingPublish): PublishChanges | Promise<PublishChanges>
  afterConfirm?(publish: OutgoingPublish): void | Promise<void>
  onPublishError?(publish: OutgoingPublish, error: unknown): void | Promise<void>
}

/** An interceptor for `mq.intercept()`: any of the consume and publish members. */
export type Interceptor = ConsumeInterceptor & PublishInterceptor

const MEMBERS = [
  'beforeHandle',
  'afterHandle',
  'onError',
  'beforePublish',
  'afterConfirm',
  'onPublishError',
] as const

/** Throws a `ConfigurationError` naming `argument` unless `value` is a usable interceptor. */
export function assertInterceptor(value: unknown, argument: string): asserts value is Interceptor {
  if (typeof value !== 'object' || value === null) {
    throw new ConfigurationError(`${argument} must be an interceptor object; got ${String(value)}`)
  }
  const candidate = value as Record<string, unknown>
  const order = candidate['order']
  if (order !== undefined && (typeof order !== 'number' || !Number.isFinite(order))) {
    throw new ConfigurationError(`${argument}.order must be a finite number; got ${String(order)}`)
  }
  const name = candidate['name']
  if (name !== undefined && typeof name !== 'string') {
    throw new ConfigurationError(`${argument}.name must be a string; got ${String(name)}`)
  }
  let members = 0
  for (const member of MEMBERS) {
    const hook = candidate[member]
    if (hook === undefined) continue
    if (typeof hook !== 'function') {
      throw new ConfigurationError(`${argument}.${member} must be a function; got ${String(hook)}`)
    }
    members++
  }
  if (members === 0) {
    throw new ConfigurationError(
      `${argument} has none of ${MEMBERS.join(', ')}: it would never run`,
    )
  }
}

/**
 * `list` with `added` in its place by `order` (stable: after those of the same order). A new
 * array: a chain that is running keeps the one it read.
 */
export function withInterceptor<I extends { readonly order?: number }>(
  list: readonly I[],
  added: I,
): readonly I[] {
  const order = added.order ?? 0
  let at = list.length
  while (at > 0 && ((list[at - 1] as I).order ?? 0) > order) at--
  return Object.freeze([...list.slice(0, at), added, ...list.slice(at)])
}
