import type { Declaration, Headers, OutgoingMessage } from '../transport/transport.js'
import type { Message } from './message.js'

/** Why a hold was cut short: the consumer is closing, or the delivery's channel went. */
export type HoldEnd = 'closing' | 'lost'

/** What to do after the handler failed a delivery held in place (see {@link DeliveryHook.failed}). */
export type InPlaceStep =
  /** Run the handler again on the same delivery after `delayMs`. */
  | { readonly kind: 'again'; readonly delayMs: number }
  /** Hold the delivery, unacknowledged, until `until` settles; then run the handler again. */
  | { readonly kind: 'halt'; readonly until: Promise<unknown> }
  /** Move it to `{queue}.dlq` with `reason` and go on. */
  | { readonly kind: 'give-up'; readonly reason: string }

/** A message to publish (and have confirmed) before the delivery is acked. */
export interface Hop {
  readonly message: OutgoingMessage
  /** What to declare again when the hop comes back unroutable (its queue was deleted). */
  readonly declarations: readonly Declaration[]
  /** How the hop's publish ended: `undefined` once confirmed, else the last failure. Called once. */
  ended(error: unknown): void
}

/**
 * The engine's one extension seam (internal to core; docs/design.md §13, "One seam"): what a
 * feature built on the engine does around one delivery. The engine knows no feature; a feature
 * hands `startConsumer` an object with the members it needs, and every member left out costs
 * the engine nothing (a consumer with no hook decodes, runs and acks without a promise).
 *
 * Before the handler:
 * - {@link claimKey}: the key the idempotency claim is taken under (default: the message id).
 * - {@link arrived}: the message is about to be handled.
 *
 * Around the handler — a consumer whose hook has {@link failed} holds its deliveries in place:
 * a delivery whose handler fails (throws, `Ack.retry`, `Ack.release`) is never put back (on a
 * quorum queue a requeued message goes behind the ones after it, and a republished copy would
 * too); the engine holds it outside the handler slots — not in `inFlight`, not holding a drain
 * open — and runs the handler again, halts, or gives up, as `failed` decides. Such a consumer
 * never cancels its subscription either (RabbitMQ's single active consumer would hand the queue
 * to the next consumer at once): closing it closes its channel, which gives every
 * unacknowledged delivery back in its place.
 *
 * How it settles — a consumer whose hook has {@link nextHop} forwards what its handler accepts:
 * the hop is published and confirmed, then the claim confirmed, then the delivery acked. A hop
 * that fails is held and tried again like a failed move, without running the handler again.
 */
export interface DeliveryHook {
  /** The key `id`'s idempotency claim is taken under. */
  claimKey?(id: string): string
  /** `message` is about to be handled; `wireHeaders` are its headers as they travelled. */
  arrived?(message: Message<unknown>, wireHeaders: Headers): void
  /**
   * The handler failed `message` (threw, or returned `Ack.retry` or `Ack.release`) for the
   * `failures`-th time in a row since it arrived or was resumed, with `reason`.
   */
  failed?(message: Message<unknown>, failures: number, reason: string): InPlaceStep
  /** A hold of `message` was cut short; it goes back to the queue in its place. */
  holdEnded?(message: Message<unknown>, why: HoldEnd): void
  /** The handler accepted `message`: the hop to confirm before the ack, or undefined for none. */
  nextHop?(message: Message<unknown>): Hop | undefined
  /** `message` was acked after its handler accepted it and its hop, if any, was confirmed (a hook with {@link nextHop}). */
  acked?(message: Message<unknown>): void
}
