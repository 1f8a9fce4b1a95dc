import { ConfigurationError, ConsumerOptions } from '@acemq/core'
import { DEFAULT_CONNECTION_NAME, checkConnectionName, describeValue } from './module-options.js'

/**
 * Options of {@link Consume}.
 *
 * @example
 * ```ts
 * const options: ConsumeOptions<OrdersConsumer> = {
 *   options: (self) => ConsumerOptions.defaults().withRetry(policy).idempotent(self.store),
 * }
 * ```
 */
export interface ConsumeOptions<I extends object = object> {
  /** The connection to consume on (default `'default'`). */
  readonly connection?: string
  /**
   * The consumer's options: retry, idempotency, prefetch, concurrency, as in plain code
   * (default `ConsumerOptions.defaults()`). A function gets the provider instance, so a store
   * injected into the provider can be used.
   */
  readonly options?: ConsumerOptions | ((provider: I) => ConsumerOptions)
}

/** @internal What {@link Consume} records on a method. */
export interface ConsumeMetadata {
  readonly queue: string
  readonly connection: string
  readonly options: ConsumerOptions | ((provider: object) => ConsumerOptions)
}

/** What {@link Consume} recorded, by method: read by the module at bootstrap. */
const consumeMetadata = new WeakMap<object, readonly ConsumeMetadata[]>()

/** @internal The `@Consume()` declarations of a method (none: empty). */
export function consumeMetadataOf(method: unknown): readonly ConsumeMetadata[] {
  return typeof method === 'function' ? (consumeMetadata.get(method) ?? []) : []
}

/**
 * Declares a provider method as the handler of a queue. The module finds it at bootstrap
 * (Nest's `DiscoveryService`) and starts the consumer once the application is ready. The
 * method gets the message (`message.payload`, `message.envelope`) and the handler context
 * (`signal`), and returns or throws exactly as a handler given to `mq.consume()`: a throw is
 * retried or dead-lettered with its reason by the retry policy. The provider must be a
 * singleton: a request-scoped or transient one is refused at bootstrap.
 *
 * @example
 * ```ts
 * @Injectable()
 * class OrdersConsumer {
 *   @Consume('orders.placed', { options: ConsumerOptions.defaults().withRetry(policy) })
 *   async placed(message: Message<OrderPlaced>, { signal }: HandlerContext) {
 *     await ship(message.payload, signal)
 *   }
 * }
 * ```
 */
export function Consume<I extends object = object>(
  queue: string,
  consumeOptions: ConsumeOptions<I> = {},
): (target: I, key: string | symbol, descriptor: PropertyDescriptor) => void {
  if (typeof queue !== 'string' || queue === '') {
    throw new ConfigurationError(
      `@Consume(queue) must be a non-empty string; got ${describeValue(queue)}`,
    )
  }
  if (typeof consumeOptions !== 'object' || consumeOptions === null) {
    throw new ConfigurationError(
      `@Consume('${queue}', options) must be an object; got ${describeValue(consumeOptions)}`,
    )
  }
  for (const key of Object.keys(consumeOptions)) {
    if (key !== 'connection' && key !== 'options') {
      throw new ConfigurationError(
        `@Consume('${queue}', options).${key} is not an option; the options are connection, options`,
      )
    }
  }
  const connection =
    consumeOptions.connection === undefined
      ? DEFAULT_CONNECTION_NAME
      : checkConnectionName(consumeOptions.connection, `@Consume('${queue}', options).connection`)
  const options = consumeOptions.options ?? ConsumerOptions.defaults()
  if (!(options instanceof ConsumerOptions) && typeof options !== 'function') {
    throw new ConfigurationError(
      `@Consume('${queue}', options).options must be a ConsumerOptions or a function of the provider returning one; got ${describeValue(options)}`,
    )
  }
  return (_target, key, descriptor) => {
    if (typeof descriptor.value !== 'function') {
      throw new ConfigurationError(
        `@Consume('${queue}') must decorate a method; ${String(key)} is not one`,
      )
    }
    const metadata: ConsumeMetadata = {
      queue,
      connection,
      options: options as ConsumeMetadata['options'],
    }
    const method = descriptor.value as object
    consumeMetadata.set(method, [...consumeMetadataOf(method), metadata])
  }
}
