import { ConfigurationError } from '@acemq/core'
import type { AmqpNodeOrder } from '../amqp-transport-options.js'

/** `order`, checked: `shuffle` or `in-order`. */
export function validNodeOrder(order: unknown): AmqpNodeOrder {
  if (order !== 'shuffle' && order !== 'in-order') {
    throw new ConfigurationError(
      `nodeOrder must be 'shuffle' or 'in-order'; got ${JSON.stringify(order)}`,
    )
  }
  return order
}

/**
 * The order one connection attempt tries a cluster's nodes in. `in-order`: as listed;
 * `shuffle`: a fresh random order each time, so a fleet of services spreads over the cluster.
 * Either way the node just lost (`lost`) goes last: recovery moves to another node first and
 * comes back to it only when no other answers.
 */
export function attemptOrder<T>(
  nodes: readonly T[],
  order: AmqpNodeOrder,
  lost: T | undefined,
  random: () => number = Math.random,
): T[] {
  const list = [...nodes]
  if (order === 'shuffle') {
    for (let i = list.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      ;[list[i], list[j]] = [list[j] as T, list[i] as T]
    }
  }
  const at = lost === undefined ? -1 : list.indexOf(lost)
  if (at >= 0) list.push(...list.splice(at, 1))
  return list
}
