import { ErrorCodes, errorCodeOf, type AceMq } from '@acemq/core'
import { type Transport } from '@acemq/core/spi'
import { connect } from '@acemq/transport-amqp'

/** Connects once, without recovery: a command that loses the broker fails and says so. */
export async function openConnection(url: string): Promise<AceMq> {
  return connect(url, {
    connectionName: 'acemq-cli',
    recovery: false,
    connectTimeout: '10s',
    logger: { warn: (message) => process.stderr.write(`warning: ${message}\n`) },
  })
}

/** How many messages wait in `queue`, or undefined when it does not exist. */
export async function queueLength(
  transport: Transport,
  queue: string,
): Promise<number | undefined> {
  if (transport.queueLength === undefined) throw new Error('the transport cannot count queues')
  try {
    return await transport.queueLength(queue)
  } catch (error) {
    if (errorCodeOf(error) === ErrorCodes.NOT_FOUND) return undefined
    throw error
  }
}
