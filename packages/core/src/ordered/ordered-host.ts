import type { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Consumer } from '../consumer/consumer.js'
import type { Handler } from '../consumer/message.js'
import type { HealthContributor } from '../health/health.js'
import type { Publisher } from '../publisher/publisher.js'
import type { Transport } from '../transport/transport.js'
import type { InPlaceFailures } from './in-place-failures.js'

/** What an ordered queue needs from its connection. Internal to core. */
export interface OrderedHost {
  /** The connection: ordered queues are registered per connection. */
  readonly owner: object
  readonly transport: Transport
  /** A publisher to `queue` through the default exchange. */
  publisher<T>(queue: string): Publisher<T>
  registerHealth(contributor: HealthContributor): () => void
  /** Starts an engine consumer of `queue` with the ordered consumers' failure hook. */
  startConsumer(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<unknown>,
    inPlace: InPlaceFailures,
  ): Promise<Consumer>
  /** Throws a `ClosedError` when the connection is closing or closed. */
  assertOpen(): void
  /** Reports something an operator should know (a partition halted). */
  reportError(error: unknown, context: string): void
}

/** Something an ordered queue's registry holds: enough for health and telemetry. */
export interface RegisteredOrderedQueue {
  readonly name: string
  readonly haltedPartitions: readonly number[]
}

const registries = new WeakMap<object, Map<string, RegisteredOrderedQueue | null>>()

/** The registry of the ordered queues declared on `owner` (null: a declaration on its way). */
export function orderedRegistry(owner: object): Map<string, RegisteredOrderedQueue | null> {
  let registry = registries.get(owner)
  if (registry === undefined) {
    registry = new Map()
    registries.set(owner, registry)
  }
  return registry
}
