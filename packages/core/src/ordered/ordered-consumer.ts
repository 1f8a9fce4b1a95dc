import type { Consumer } from '../consumer/consumer.js'
import type { Duration } from '../duration.js'

/**
 * The consumer of an ordered queue: one engine consumer per partition. Closing it lets running
 * handlers finish, then closes the partitions' channels, which gives every message they held
 * (a halted one included) back to its queue in its place.
 *
 * @example
 * ```ts
 * const consumer = await ledger.consume(handle)
 * await consumer.close()
 * ```
 */
export class OrderedConsumer implements Consumer {
  /** The ordered queue's name. */
  readonly queue: string
  readonly #partitions: readonly Consumer[]
  #closing: Promise<void> | undefined

  /** @internal */
  constructor(queue: string, partitions: readonly Consumer[]) {
    this.queue = queue
    this.#partitions = partitions
  }

  /** Handlers running now across the partitions. A halted partition runs none. */
  get inFlight(): number {
    return this.#partitions.reduce((sum, c) => sum + c.inFlight, 0)
  }

  /** Messages waiting at the pause gate across the partitions. */
  get held(): number {
    return this.#partitions.reduce((sum, c) => sum + c.held, 0)
  }

  /** Messages held across the partitions while they wait to run again, or halted. */
  get waiting(): number {
    return this.#partitions.reduce((sum, c) => sum + c.waiting, 0)
  }

  /** Whether {@link close} has been called. */
  get closed(): boolean {
    return this.#closing !== undefined
  }

  /** Closes every partition's consumer; `drainTimeout` (default 20 s) bounds running handlers. */
  close(options: { readonly drainTimeout?: Duration } = {}): Promise<void> {
    this.#closing ??= Promise.all(this.#partitions.map((c) => c.close(options))).then(
      () => undefined,
    )
    return this.#closing
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}
