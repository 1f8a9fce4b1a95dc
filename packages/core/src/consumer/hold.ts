import { onAbort, sleep } from '../internal/timers.js'
import type { Delivery } from '../transport/transport.js'
import type { HoldEnd } from './delivery-hook.js'

/**
 * One delivery held in place (see `DeliveryHook.failed`), from the moment its handler
 * failed until it is run again (the delay is over, or the halt was resumed, and consuming is
 * not paused) or the hold is cut short.
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
