import { DEAD_LETTER_EXCHANGE, RETRY_EXCHANGE } from '../constants.js'
import { ConfigurationError } from '../errors.js'
import {
  deadLetterQueueName,
  parkedQueueName,
  rungArguments,
  rungQueueName,
  validateQueueName,
} from '../retry/queue-names.js'
import type { RetryPolicy } from '../retry/retry-policy.js'
import type { Declaration, ExchangeType, HeaderValue } from '../transport/transport.js'

type QueueDeclaration = Extract<Declaration, { kind: 'queue' }>
type ExchangeDeclaration = Extract<Declaration, { kind: 'exchange' }>
type BindingDeclaration = Extract<Declaration, { kind: 'binding' }>

const EXCHANGE_TYPES: readonly ExchangeType[] = ['direct', 'topic', 'fanout', 'headers']

/** Options for a queue declared by {@link Topology}. */
export interface QueueOptions {
  /** `quorum` (the default for source queues) or `classic`. */
  readonly type?: 'quorum' | 'classic'
  /** Extra queue arguments (`x-max-length`, ...). `x-queue-type` is set from `type`. */
  readonly arguments?: Readonly<Record<string, HeaderValue>>
}

function exchange(name: string, type: ExchangeType): ExchangeDeclaration {
  return { kind: 'exchange', name, type, durable: true, arguments: {} }
}

function queue(
  name: string,
  type: 'quorum' | 'classic',
  args: Record<string, HeaderValue>,
): QueueDeclaration {
  return { kind: 'queue', name, type, durable: true, arguments: args }
}

function binding(queueName: string, exchangeName: string, routingKey: string): BindingDeclaration {
  return { kind: 'binding', queue: queueName, exchange: exchangeName, routingKey, arguments: {} }
}

/**
 * What a consumer of `queue` declares before it subscribes, so a failure always has
 * somewhere to go: `acemq.dlx`, `{queue}.dlq` and `{queue}.parked` bound to it; and, only when
 * the policy waits in the broker, `acemq.retry`, one rung queue per broker delay, and `queue`
 * bound to `acemq.retry`. Byte-identical to what {@link Topology.queueWithRetry} declares.
 *
 * @example
 * ```ts
 * consumerDeclarations('orders.new', RetryPolicy.exponential(6, '10s', '5m'))
 * ```
 */
export function consumerDeclarations(
  queueName: string,
  policy: RetryPolicy | undefined,
): Declaration[] {
  const dlq = deadLetterQueueName(queueName)
  const parked = parkedQueueName(queueName)
  const declarations: Declaration[] = [
    exchange(DEAD_LETTER_EXCHANGE, 'direct'),
    queue(dlq, 'classic', {}),
    queue(parked, 'classic', {}),
    binding(dlq, DEAD_LETTER_EXCHANGE, dlq),
    binding(parked, DEAD_LETTER_EXCHANGE, parked),
  ]
  const rungs = policy?.brokerRungs() ?? []
  if (rungs.length > 0) {
    declarations.push(exchange(RETRY_EXCHANGE, 'direct'))
    for (const delay of rungs) {
      declarations.push(
        queue(rungQueueName(queueName, delay), 'classic', rungArguments(queueName, delay)),
      )
    }
    declarations.push(binding(queueName, RETRY_EXCHANGE, queueName))
  }
  return declarations
}

function keyOf(declaration: Declaration): string {
  switch (declaration.kind) {
    case 'exchange':
      return `exchange:${declaration.name}`
    case 'queue':
      return `queue:${declaration.name}`
    case 'binding':
      return `binding:${declaration.exchange}:${declaration.routingKey}:${declaration.queue}`
  }
}

function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x20) return true
  return false
}

function validateExchangeName(name: string, argument: string): string {
  if (
    typeof name !== 'string' ||
    name.length === 0 ||
    Buffer.byteLength(name) > 255 ||
    hasControlCharacter(name)
  ) {
    throw new ConfigurationError(
      `${argument} must be a non-empty exchange name of at most 255 bytes; got ${JSON.stringify(name)}`,
    )
  }
  if (name.startsWith('amq.')) {
    throw new ConfigurationError(
      `${argument}: the amq. prefix is reserved by the broker; got ${JSON.stringify(name)}`,
    )
  }
  return name
}

/**
 * The broker topology an application needs, declared in one go with `mq.applyTopology()`.
 * Immutable: every method returns a new, frozen topology.
 *
 * @example
 * ```ts
 * await mq.applyTopology(
 *   Topology.define()
 *     .exchange('orders', 'topic')
 *     .queueWithRetry('orders.new', RetryPolicy.exponential(6, '10s', '5m'))
 *     .bind('orders.new', 'orders', 'order.*'),
 * )
 * ```
 */
export class Topology {
  readonly #declarations: readonly Declaration[]

  private constructor(declarations: readonly Declaration[]) {
    this.#declarations = declarations
    Object.freeze(this)
  }

  /** An empty topology. */
  static define(): Topology {
    return new Topology([])
  }

  #add(...declarations: Declaration[]): Topology {
    return new Topology([...this.#declarations, ...declarations])
  }

  /** A durable exchange. */
  exchange(name: string, type: ExchangeType = 'direct'): Topology {
    if (!EXCHANGE_TYPES.includes(type)) {
      throw new ConfigurationError(
        `exchange(type) must be one of ${EXCHANGE_TYPES.join(', ')}; got ${JSON.stringify(type)}`,
      )
    }
    return this.#add(exchange(validateExchangeName(name, 'exchange(name)'), type))
  }

  /** A durable queue, quorum unless `options.type` says classic, with no dead-lettering. */
  queue(name: string, options: QueueOptions = {}): Topology {
    return this.#add(Topology.#sourceQueue(name, options, false))
  }

  /**
   * A source queue whose rejected messages go to `{name}.dlq` through `acemq.dlx`, with its
   * dead-letter and parked queues.
   */
  queueWithDeadLetter(name: string, options: QueueOptions = {}): Topology {
    return this.#add(
      Topology.#sourceQueue(name, options, true),
      ...consumerDeclarations(name, undefined),
    )
  }

  /** {@link queueWithDeadLetter} plus the rung queues `policy` waits in. */
  queueWithRetry(name: string, policy: RetryPolicy, options: QueueOptions = {}): Topology {
    return this.#add(
      Topology.#sourceQueue(name, options, true),
      ...consumerDeclarations(name, policy),
    )
  }

  /** Binds `queue` to `exchange` with `routingKey`. */
  bind(queueName: string, exchangeName: string, routingKey = ''): Topology {
    validateQueueName(queueName, 'bind(queue)')
    if (typeof routingKey !== 'string' || Buffer.byteLength(routingKey) > 255) {
      throw new ConfigurationError(
        `bind(routingKey) must be a string of at most 255 bytes; got ${JSON.stringify(routingKey)}`,
      )
    }
    if (typeof exchangeName !== 'string' || exchangeName === '') {
      throw new ConfigurationError(
        `bind(exchange) must name an exchange (the default exchange cannot be bound); got ${JSON.stringify(exchangeName)}`,
      )
    }
    return this.#add(binding(queueName, exchangeName, routingKey))
  }

  /**
   * What {@link AceMq.applyTopology} would declare, in order (exchanges, then queues, then
   * bindings), each once. Throws when one name is declared twice with different settings.
   */
  plan(): readonly Declaration[] {
    const seen = new Map<string, Declaration>()
    for (const declaration of this.#declarations) {
      const key = keyOf(declaration)
      const earlier = seen.get(key)
      if (earlier === undefined) seen.set(key, declaration)
      else if (JSON.stringify(earlier) !== JSON.stringify(declaration)) {
        throw new ConfigurationError(
          `the topology declares ${key} twice with different settings: ${JSON.stringify(earlier)} and ${JSON.stringify(declaration)}`,
        )
      }
    }
    const all = [...seen.values()]
    const order = { exchange: 0, queue: 1, binding: 2 } as const
    return Object.freeze(all.sort((a, b) => order[a.kind] - order[b.kind]))
  }

  static #sourceQueue(
    name: string,
    options: QueueOptions,
    deadLettered: boolean,
  ): QueueDeclaration {
    validateQueueName(name, 'queue name')
    const type = options.type ?? 'quorum'
    if (type !== 'quorum' && type !== 'classic') {
      throw new ConfigurationError(
        `options.type must be 'quorum' or 'classic'; got ${JSON.stringify(type)}`,
      )
    }
    const extra = { ...(options.arguments ?? {}) }
    if ('x-queue-type' in extra) {
      throw new ConfigurationError(
        `queue '${name}': set the queue type with options.type, not the x-queue-type argument`,
      )
    }
    const args: Record<string, HeaderValue> = deadLettered
      ? {
          'x-dead-letter-exchange': DEAD_LETTER_EXCHANGE,
          'x-dead-letter-routing-key': deadLetterQueueName(name),
          ...extra,
        }
      : extra
    return queue(name, type, args)
  }
}
