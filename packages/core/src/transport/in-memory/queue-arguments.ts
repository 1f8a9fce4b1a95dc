/**
 * Queue declarations as RabbitMQ checks them: which arguments it refuses, which it compares on
 * a second declaration, and the TTL, delivery limit and consumer timeout a queue gets from them.
 */
import { ConfigurationError, type AceMqError } from '../../errors.js'
import type { Declaration, HeaderValue } from '../transport.js'
import { inequivalent, refused, type MemoryQueue } from './broker-model.js'
import { equivalentArgument, wholeNumber } from './wire-values.js'

/**
 * The `x-delivery-limit` of a quorum queue declared without one: RabbitMQ 4 gives every quorum
 * queue a limit of 20 returns (RabbitMQ 3.x had none), and the in-memory transport models 4.
 */
export const DEFAULT_QUORUM_DELIVERY_LIMIT = 20

/** The queue arguments RabbitMQ compares when a queue is declared again (3.10). */
const COMPARED_QUEUE_ARGUMENTS = [
  'x-expires',
  'x-message-ttl',
  'x-dead-letter-exchange',
  'x-dead-letter-routing-key',
  'x-max-length',
  'x-max-length-bytes',
  'x-max-in-memory-length',
  'x-max-in-memory-bytes',
  'x-max-priority',
  'x-overflow',
  'x-queue-mode',
  'x-single-active-consumer',
  'x-quorum-initial-group-size',
  'x-max-age',
  'x-stream-max-segment-size-bytes',
  'x-initial-cluster-size',
  'x-queue-leader-locator',
  'x-delivery-limit',
] as const

/**
 * Declares a queue, or checks a second declaration against the first; `consumerTimeoutMs` is
 * the broker's default for a queue without `x-consumer-timeout`.
 */
export function declareQueue(
  queues: Map<string, MemoryQueue>,
  consumerTimeoutMs: number | undefined,
  declaration: Extract<Declaration, { kind: 'queue' }>,
): void {
  const args = declaration.arguments
  const queueType: unknown = args['x-queue-type']
  if (queueType !== undefined && !(declaration.type === 'quorum' && queueType === 'quorum')) {
    throw new ConfigurationError(
      `queue '${declaration.name}': arguments must not set x-queue-type for a ${declaration.type} queue: the declaration's type decides it`,
    )
  }
  const invalid = (what: string, why: string): AceMqError =>
    refused(
      declaration,
      `PRECONDITION_FAILED - invalid arg '${what}' for queue '${declaration.name}': ${why}`,
    )
  const ttl = nonNegativeArgument(args, 'x-message-ttl', invalid)
  const consumerTimeout = nonNegativeArgument(args, 'x-consumer-timeout', invalid)
  const limitArgument = args['x-delivery-limit']
  const limit = limitArgument === undefined ? undefined : wholeNumber(limitArgument)
  if (declaration.type === 'quorum' && limitArgument !== undefined && limit === undefined) {
    throw invalid('x-delivery-limit', 'unacceptable type')
  }
  if (args['x-dead-letter-routing-key'] !== undefined) {
    if (args['x-dead-letter-exchange'] === undefined) {
      throw invalid('x-dead-letter-routing-key', 'routing_key_but_no_dlx_defined')
    }
  }
  for (const key of ['x-dead-letter-exchange', 'x-dead-letter-routing-key'] as const) {
    const value = args[key]
    if (value !== undefined && typeof value !== 'string') throw invalid(key, 'unacceptable type')
  }
  if (declaration.type === 'quorum' && !declaration.durable) {
    throw refused(
      declaration,
      `PRECONDITION_FAILED - invalid property 'non-durable' for queue '${declaration.name}'`,
    )
  }
  const existing = queues.get(declaration.name)
  if (existing !== undefined) {
    if (existing.durable !== declaration.durable) throw inequivalent(declaration, 'durable')
    if (existing.type !== declaration.type) throw inequivalent(declaration, 'x-queue-type')
    for (const key of COMPARED_QUEUE_ARGUMENTS) {
      if (!equivalentArgument(existing.arguments[key], args[key]))
        throw inequivalent(declaration, key)
    }
    return
  }
  queues.set(declaration.name, {
    name: declaration.name,
    type: declaration.type,
    durable: declaration.durable,
    arguments: args,
    ttlMs: ttl,
    deliveryLimit:
      declaration.type !== 'quorum'
        ? undefined
        : limit === undefined
          ? DEFAULT_QUORUM_DELIVERY_LIMIT
          : limit < 0
            ? undefined
            : limit,
    consumerTimeoutMs: consumerTimeout ?? consumerTimeoutMs,
    ready: [],
    returned: 0,
    subscriptions: [],
    next: 0,
    nextSeq: 0,
    timer: undefined,
    timerDue: Infinity,
  })
}

function nonNegativeArgument(
  args: Readonly<Record<string, HeaderValue>>,
  key: string,
  invalid: (what: string, why: string) => AceMqError,
): number | undefined {
  const value = args[key]
  if (value === undefined) return undefined
  const n = wholeNumber(value)
  if (n === undefined) throw invalid(key, 'unacceptable type')
  if (n < 0) throw invalid(key, `{value_negative,${n}}`)
  return n
}
