/**
 * Dead-lettering as RabbitMQ 3.10 does it: the copy a dying message becomes, its `x-death`
 * history, and the cycle check that drops a message going round queues that only expire it.
 */
import { headerInteger, headerString } from '../../headers/header-values.js'
import type { Headers, HeaderValue } from '../transport.js'
import type { DeathReason, MemoryQueue, QueuedMessage, StoredMessage } from './broker-model.js'

/**
 * The copy a message dying in `queue` becomes: to the queue's `x-dead-letter-exchange`
 * (undefined without one: the message is dropped) with its `x-dead-letter-routing-key` or the
 * message's own; `x-death` gets an entry per queue and reason, counted and moved to the front
 * when it dies there again; `x-first-death-*` are set once; a per-message `expiration` moves
 * into the entry as `original-expiration`.
 */
export function deadLetterCopy(
  queue: MemoryQueue,
  message: QueuedMessage,
  reason: DeathReason,
): StoredMessage | undefined {
  const exchange = queue.arguments['x-dead-letter-exchange']
  if (typeof exchange !== 'string') return undefined
  const routingKeyArgument = queue.arguments['x-dead-letter-routing-key']
  const routingKey =
    typeof routingKeyArgument === 'string' ? routingKeyArgument : message.routingKey
  const { expiration, ...properties } = message.properties
  const previous = message.headers['x-death']
  const deaths: HeaderValue[] = Array.isArray(previous) ? [...(previous as HeaderValue[])] : []
  const index = deaths.findIndex((death) => isTable(death) && deathOf(death, queue.name, reason))
  let entry: Record<string, HeaderValue>
  if (index >= 0) {
    const found = deaths.splice(index, 1)[0] as Record<string, HeaderValue>
    entry = { ...found, count: { '!': 'long', value: (headerInteger(found['count']) ?? 0) + 1 } }
  } else {
    entry = {
      count: { '!': 'long', value: 1 },
      reason,
      queue: queue.name,
      time: { '!': 'timestamp', value: Math.floor(Date.now() / 1000) },
      exchange: message.exchange,
      'routing-keys': [message.routingKey],
      ...(expiration === undefined ? {} : { 'original-expiration': expiration }),
    }
  }
  deaths.unshift(entry)
  const headers: Headers = { ...message.headers, 'x-death': deaths }
  if (message.headers['x-first-death-reason'] === undefined) {
    headers['x-first-death-reason'] = reason
    headers['x-first-death-queue'] = queue.name
    headers['x-first-death-exchange'] = message.exchange
  }
  return {
    body: message.body,
    headers,
    properties,
    exchange,
    routingKey,
    persistent: message.persistent,
    redelivered: false,
  }
}

/**
 * Whether a dead-lettered copy going to `target` would go round a cycle of queues with no
 * rejection in it: RabbitMQ drops it for the queues of that cycle.
 */
export function diesInCycle(reason: DeathReason, target: string, copy: StoredMessage): boolean {
  if (reason === 'rejected') return false
  const deaths = copy.headers['x-death']
  return Array.isArray(deaths) && isCycle(target, deaths as HeaderValue[])
}

function isTable(value: unknown): value is Record<string, HeaderValue> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Uint8Array) &&
    !Object.hasOwn(value, '!')
  )
}

function deathOf(death: Record<string, HeaderValue>, queue: string, reason: string): boolean {
  return headerString(death['queue']) === queue && headerString(death['reason']) === reason
}

/**
 * RabbitMQ's cycle check: going to `queue`, the message has died there before, and every death
 * since (that one included) was automatic (not `rejected`).
 */
function isCycle(queue: string, deaths: readonly HeaderValue[]): boolean {
  for (const death of deaths) {
    // Something other than a table was put there by a client: not a fully automatic cycle.
    if (!isTable(death)) return false
    if (headerString(death['reason']) === 'rejected') return false
    if (headerString(death['queue']) === queue) return true
  }
  return false
}
