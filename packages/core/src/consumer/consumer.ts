import type { Duration } from '../duration.js'

/**
 * A running consumer. Closing it stops this consumer only: it cancels the subscription,
 * hands back deliveries that have not started, waits for running handlers (so their own
 * publishes, moves and acks complete) and then closes its channel.
 *
 * @example
 * ```ts
 * const consumer = await mq.consume('orders.placed', ConsumerOptions.defaults(), handle)
 * await consumer.close()
 * ```
 */
export interface Consumer extends AsyncDisposable {
  readonly queue: string
  /** Handlers of this consumer running now, counted until their settlement is done. */
  readonly inFlight: number
  /** Deliveries waiting at the pause gate, never handed to a handler. */
  readonly held: number
  /**
   * Deliveries waiting out a delay while holding their place in the prefetch window (a retry
   * wait in the consumer, an in-progress or store-failure put-back, a move being tried again).
   * They do not occupy a handler and are not counted in {@link inFlight}.
   */
  readonly waiting: number
  /** Stops this consumer. `drainTimeout` (default 20 s) bounds the wait for running handlers. */
  close(options?: { readonly drainTimeout?: Duration }): Promise<void>
}
