import { AceMq, type AceMqOptions } from '@acemq/core'
import { AmqpTransport } from './amqp-transport.js'
import type { AmqpConnectTargets, AmqpTransportOptions } from './amqp-transport-options.js'

/** Options for {@link connect}: the transport's and the connection's, in one object. */
export interface ConnectOptions extends AmqpTransportOptions, AceMqOptions {}

/**
 * Connects to RabbitMQ and returns an `AceMq`: publishers, consumers, topology, drain, health.
 * `url` is one node or a list of a cluster's nodes; anything else is refused with a
 * `ConfigurationError`.
 *
 * @example
 * ```ts
 * await using mq = await connect('amqp://guest:guest@localhost:5672', { connectionName: 'orders-api' })
 * await using clustered = await connect(['amqp://app:s3cret@rabbit-1', 'amqp://app:s3cret@rabbit-2'])
 * ```
 */
export async function connect(
  url: AmqpConnectTargets,
  options: ConnectOptions = {},
): Promise<AceMq> {
  const { codecs, origin, onError, ...transportOptions } = options
  const aceMqOptions: AceMqOptions = {
    ...(codecs !== undefined && { codecs }),
    ...(origin !== undefined && { origin }),
    ...(onError !== undefined && { onError }),
  }
  return AceMq.connect(new AmqpTransport(url, transportOptions), aceMqOptions)
}
