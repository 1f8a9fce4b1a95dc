import { Inject } from '@nestjs/common'
import { DEFAULT_CONNECTION_NAME, checkConnectionName } from './module-options.js'

/**
 * The injection token of a named connection (an `AceMqConnection`). The default connection is
 * also injectable by the class itself.
 *
 * @example
 * ```ts
 * moduleRef.get(getAceMqToken('audit'), { strict: false })
 * ```
 */
export function getAceMqToken(connection: string = DEFAULT_CONNECTION_NAME): string {
  return `acemq:connection:${checkConnectionName(connection, 'getAceMqToken(connection)')}`
}

/**
 * The injection token of a publisher declared in the module's `publishers` option.
 *
 * @example
 * ```ts
 * moduleRef.get(getPublisherToken('orders'), { strict: false })
 * ```
 */
export function getPublisherToken(
  key: string,
  connection: string = DEFAULT_CONNECTION_NAME,
): string {
  checkConnectionName(key, 'getPublisherToken(key)')
  return `acemq:publisher:${checkConnectionName(connection, 'getPublisherToken(connection)')}:${key}`
}

/** @internal The token of a connection's checked options. */
export function optionsToken(connection: string): string {
  return `acemq:options:${connection}`
}

/**
 * Injects a connection (`AceMqConnection`), the default one unless named. Works without
 * `emitDecoratorMetadata`.
 *
 * @example
 * ```ts
 * constructor(@InjectAceMq() private readonly acemq: AceMqConnection) {}
 * ```
 */
export function InjectAceMq(
  connection: string = DEFAULT_CONNECTION_NAME,
): ParameterDecorator & PropertyDecorator {
  return Inject(getAceMqToken(connection))
}

/**
 * Injects a publisher declared in the module's `publishers` option (a
 * `ConnectionPublisher<T>`).
 *
 * @example
 * ```ts
 * constructor(
 *   @InjectPublisher('orders') private readonly orders: ConnectionPublisher<OrderPlaced>,
 * ) {}
 * ```
 */
export function InjectPublisher(
  key: string,
  connection: string = DEFAULT_CONNECTION_NAME,
): ParameterDecorator & PropertyDecorator {
  return Inject(getPublisherToken(key, connection))
}
