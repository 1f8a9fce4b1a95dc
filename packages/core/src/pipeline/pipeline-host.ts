import type { CodecRegistry } from '../codec/codec-registry.js'
import type { ConsumerOptions } from '../consumer/consumer-options.js'
import type { Consumer } from '../consumer/consumer.js'
import type { Handler } from '../consumer/message.js'
import type { Envelope } from '../envelope/envelope.js'
import type { HealthContributor } from '../health/health.js'
import type { Publisher } from '../publisher/publisher.js'
import type { Instrumentation } from '../telemetry/instrumentation.js'
import type { Headers, Transport } from '../transport/transport.js'
import type { StepHook } from './step-hook.js'

/** What a pipeline needs from its connection. Internal to core. */
export interface PipelineHost {
  /** The connection: pipelines are registered per connection. */
  readonly owner: object
  readonly transport: Transport
  readonly codecs: CodecRegistry
  /** `x-acemq-origin` for a hop whose message carried none. */
  readonly origin: string
  readonly instrumentation: Instrumentation | undefined
  /** A publisher to `exchange` with `routingKey` that adds `reserved` headers. */
  publisher<T>(
    exchange: string,
    routingKey: string,
    reserved: (envelope: Envelope) => Headers,
  ): Publisher<T>
  /** Adds a health contributor; returns a function that removes it. */
  registerHealth(contributor: HealthContributor): () => void
  /** Starts an engine consumer of `queue` with a pipeline step's hook. */
  startConsumer(
    queue: string,
    options: ConsumerOptions,
    handler: Handler<unknown>,
    step: StepHook,
  ): Promise<Consumer>
  /** Throws a `ClosedError` when the connection is closing or closed. */
  assertOpen(): void
}

const registries = new WeakMap<object, Set<string>>()

/** The names of the pipelines built (and not closed) on `owner`. */
export function pipelineRegistry(owner: object): Set<string> {
  let registry = registries.get(owner)
  if (registry === undefined) {
    registry = new Set()
    registries.set(owner, registry)
  }
  return registry
}
