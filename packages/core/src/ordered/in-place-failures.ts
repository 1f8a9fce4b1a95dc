import type { Message } from '../consumer/message.js'
import { onAbort, sleep } from '../internal/timers.js'
import type { Delivery } from '../transport/transport.js'

/** Why a hold was cut short: the consumer is closing, or the delivery's channel went. */
export type HoldEnd = 'closing' | 'lost'

/** What an ordered consumer does after its handler failed a delivery. */
export type InPlaceStep =
  /** Run the handler again on the same delivery after `delayMs`. */
  | { readonly kind: 'again'; readonly delayMs: number }
  /** Hold the delivery, unacknowledged, until `until` settles; then run the handler again. */
  | { readonly kind: 'halt'; readonly until: Promise<unknown> }
  /** Move it to `{queue}.dlq` with `reason` and go on. */
  | { readonly kind: 'give-up'; readonly reason: string }

/**
 * The engine's hook for ordered consumers (internal to core). A delivery whose handler fails
 * is never put back: on a quorum queue a requeued message goes behind the ones after it, and a
 * republished copy would too. The engine holds it instead — outside the handler slots, so it
 * neither counts in `inFlight` nor holds a drain open — and runs the handler again in place,
 * halts, or gives up, as {@link InPlaceFailures.failed} decides. A consumer with this hook also
 * never cancels its subscription while it holds deliveries (RabbitMQ's single active consumer
 * would hand the queue to the next consumer at once): closing it closes its channel, which
 * gives every unacknowledged delivery back to the queue in its place.
 */
export interface InPlaceFailures {
  /**
   * The handler failed `message` (threw, or returned `Ack.retry` or `Ack.release`) for the
   * `failures`-th time in a row since it arrived or was resumed, with `reason`.
   */
  failed(message: Message<unknown>, failures: number, reason: string): InPlaceStep
  /** A hold of `message` was cut short; it goes back to the queue in its place. */
  holdEnded(message: Message<unknown>, why: HoldEnd): void
}

/**
 * One delivery held by an ordered consumer, from the moment its handler failed until it is run
 * again (the delay is over, or the halt was resumed, and consuming is not paused) or the hold
 * is cut short.
 */
export class Hold {
  readonly #delivery: Delivery
  readonly #end = new AbortController()
  #gateOpened: (() => void) | undefined

  constructor(delivery: Delivery) {
    this.#delivery = delivery
  }

  /**
   * Waits `until` (milliseconds, or a promise), then for consuming to resume when `paused()`.
   * Resolves `undefined` when the handler may run again, or why the hold was cut short.
   */
  async wait(
    until: number | Promise<unknown>,
    closing: AbortSignal,
    paused: () => boolean,
  ): Promise<HoldEnd | undefined> {
    const end = this.#end.signal
    const stopWatching = onAbort(closing, () => this.#cut('closing'))
    try {
      if (typeof until === 'number') await sleep(until, end)
      else await Promise.race([until.then(undefined, () => undefined), whenAborted(end)])
      while (!end.aborted && paused()) {
        await Promise.race([
          new Promise<void>((open) => (this.#gateOpened = open)),
          whenAborted(end),
        ])
      }
      if (this.#delivery.settleable === false) this.#cut('lost')
      return end.aborted ? (end.reason as HoldEnd) : undefined
    } finally {
      stopWatching()
      this.#gateOpened = undefined
      // Ends the watchers of the waits above, however the hold ended.
      if (!end.aborted) this.#end.abort()
    }
  }

  /** The connection or a channel was lost: cut the hold when this delivery went with it. */
  channelLost(): void {
    if (this.#delivery.settleable !== true) this.#cut('lost')
  }

  /** Consuming resumed. */
  resumed(): void {
    this.#gateOpened?.()
  }

  #cut(why: HoldEnd): void {
    if (!this.#end.signal.aborted) this.#end.abort(why)
  }
}

function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const stop = onAbort(signal, () => {
      stop()
      resolve()
    })
  })
}
