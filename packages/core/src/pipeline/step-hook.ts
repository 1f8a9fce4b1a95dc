import type { Message } from '../consumer/message.js'
import type { Declaration, Headers, OutgoingMessage } from '../transport/transport.js'

/** The next step's message, to be published (and confirmed) before the delivery is acked. */
export interface Hop {
  readonly message: OutgoingMessage
  /** What to declare again when the hop comes back unroutable (its queue was deleted). */
  readonly declarations: readonly Declaration[]
  /** How the hop's publish ended: `undefined` once confirmed, else the last failure. Called once. */
  ended(error: unknown): void
}

/**
 * The engine's hook for pipeline steps (internal to core). A step's consumer is an ordinary
 * engine consumer whose idempotency key is `{pipeline}.{step}:{id}` (with the route position when
 * the route revisits the step), and whose accepted deliveries are
 * settled in this order: the next step's message is published and confirmed, the claim is
 * confirmed, then the delivery is acked. A crash between any two of them hands the delivery
 * back, and an idempotent step finds its claim (live or confirmed) when it comes back.
 */
export interface StepHook {
  /**
   * The key a message on this step is claimed under: `{pipeline}.{step}:{id}`. Called just
   * after {@link StepHook.arrived} for the same message, whose route decides the key.
   */
  claimKey(id: string): string
  /**
   * `message` is about to be claimed and handled; `wireHeaders` are its headers as they
   * travelled.
   */
  arrived(message: Message<unknown>, wireHeaders: Headers): void
  /** The handler accepted `message`: its next hop, or undefined when the run ends here. */
  nextHop(message: Message<unknown>): Hop | undefined
  /** `message` was acked after its handler accepted it (and its hop, if any, was confirmed). */
  acked(message: Message<unknown>): void
}
