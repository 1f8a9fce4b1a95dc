import { RETRY_EXCHANGE } from '../constants.js'
import { formatDuration } from '../duration.js'
import { ConfigurationError } from '../errors.js'

// RabbitMQ refuses queue names longer than 255 bytes (an AMQP short string).
const MAX_NAME_BYTES = 255
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/

function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8')
}

/**
 * Checks a queue name and returns it: a non-empty string of at most 255 bytes in UTF-8, no
 * control characters, and not starting with `amq.` (RabbitMQ reserves that prefix, and AceMQ
 * declares `{queue}.dlq` and friends next to every queue it consumes). The name itself may
 * use all 255 bytes; the names derived from it (`.dlq`, `.parked`, `.retry.{delay}`) are
 * checked when they are built, and a name too long to carry its suffix is refused then.
 * Throws a {@link ConfigurationError} naming `argumentName` and the value.
 *
 * @example
 * ```ts
 * validateQueueName('orders.placed') // 'orders.placed'
 * validateQueueName('')              // throws ConfigurationError
 * ```
 */
export function validateQueueName(queue: string, argumentName = 'queue'): string {
  if (typeof queue !== 'string' || queue === '') {
    throw new ConfigurationError(
      `${argumentName} must be a non-empty queue name; got ${queue === '' ? "''" : String(queue)}`,
    )
  }
  if (CONTROL.test(queue)) {
    throw new ConfigurationError(
      `${argumentName} must not contain control characters; got ${JSON.stringify(queue)}`,
    )
  }
  if (byteLength(queue) > MAX_NAME_BYTES) {
    throw new ConfigurationError(
      `${argumentName} is ${byteLength(queue)} bytes in UTF-8, over RabbitMQ's ${MAX_NAME_BYTES}-byte limit; got '${queue.slice(0, 40)}…'`,
    )
  }
  if (queue.startsWith('amq.')) {
    throw new ConfigurationError(
      `${argumentName} must not start with 'amq.', which RabbitMQ reserves for itself; got '${queue}'`,
    )
  }
  return queue
}

function derived(queue: string, suffix: string): string {
  const name = `${validateQueueName(queue)}${suffix}`
  if (byteLength(name) > MAX_NAME_BYTES) {
    throw new ConfigurationError(
      `queue '${queue.slice(0, 40)}…' is too long to carry its '${suffix}' queue: '${suffix}' makes it ${byteLength(name)} bytes, over RabbitMQ's ${MAX_NAME_BYTES}-byte limit; use a shorter queue name`,
    )
  }
  return name
}

/**
 * The queue a message goes to when it is given up on or rejected: `{queue}.dlq`.
 *
 * @example
 * ```ts
 * deadLetterQueueName('orders.new') // 'orders.new.dlq'
 * ```
 */
export function deadLetterQueueName(queue: string): string {
  return derived(queue, '.dlq')
}

/**
 * The queue a message goes to when it is parked or cannot be decoded: `{queue}.parked`.
 *
 * @example
 * ```ts
 * parkedQueueName('orders.new') // 'orders.new.parked'
 * ```
 */
export function parkedQueueName(queue: string): string {
  return derived(queue, '.parked')
}

/**
 * The longest wait a rung queue can hold, in milliseconds: 315 360 000 000, ten years of 365
 * days. RabbitMQ refuses a larger `x-message-ttl` (and a larger per-message `expiration`) with
 * `PRECONDITION_FAILED ... value_too_large`, so `RetryPolicy` refuses a policy with a longer
 * broker wait when it is built, and {@link rungArguments} refuses one too.
 *
 * @example
 * ```ts
 * RetryPolicy.exponential(60, '30s', MAX_BROKER_WAIT) // the longest cap a broker wait can have
 * ```
 */
export const MAX_BROKER_WAIT = 315_360_000_000

function checkRungDelay(delayMs: number): number {
  if (typeof delayMs !== 'number' || !Number.isSafeInteger(delayMs) || delayMs < 1) {
    throw new ConfigurationError(
      `delayMs must be a whole number of milliseconds, at least 1, for a retry queue; got ${String(delayMs)}`,
    )
  }
  if (delayMs > MAX_BROKER_WAIT) {
    throw new ConfigurationError(
      `delayMs must be at most ${MAX_BROKER_WAIT} (RabbitMQ's largest message TTL) for a retry queue; got ${delayMs}`,
    )
  }
  return delayMs
}

/**
 * The rung queue a broker wait of `delayMs` sits on: `{queue}.retry.{delay}`, the delay in the
 * largest unit that divides it (`30s`, `90s`, `5m`, `2h`, `500ms`).
 *
 * Sub-second delays render in milliseconds (`orders.new.retry.500ms`), as the Java library
 * does; the contract fixture records that the Go, Python and Ruby libraries render the same
 * delay as `orders.new.retry.0s`, an open disagreement. It only matters for a policy whose
 * broker threshold is lowered below a second.
 *
 * @example
 * ```ts
 * rungQueueName('orders.new', 90_000) // 'orders.new.retry.90s'
 * ```
 */
export function rungQueueName(queue: string, delayMs: number): string {
  return derived(queue, `.retry.${formatDuration(checkRungDelay(delayMs))}`)
}

/**
 * The arguments a rung queue is declared with, exactly: its time-to-live is the wait, and it
 * dead-letters through {@link RETRY_EXCHANGE} back to the source queue. Any other argument
 * would make a sibling library's declaration of the same queue fail with
 * `PRECONDITION_FAILED`.
 *
 * @example
 * ```ts
 * rungArguments('orders.new', 40_000)
 * // { 'x-message-ttl': 40000, 'x-dead-letter-exchange': 'acemq.retry',
 * //   'x-dead-letter-routing-key': 'orders.new' }
 * ```
 */
export function rungArguments(queue: string, delayMs: number): Record<string, string | number> {
  return {
    'x-message-ttl': checkRungDelay(delayMs),
    'x-dead-letter-exchange': RETRY_EXCHANGE,
    'x-dead-letter-routing-key': validateQueueName(queue),
  }
}
