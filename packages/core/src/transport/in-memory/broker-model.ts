/**
 * What the in-memory broker holds: exchanges and their bindings, queues and their messages,
 * subscriptions and the deliveries they have not settled.
 */
import { AceMqError } from '../../errors.js'
import { ErrorCodes } from '../../error-codes.js'
import type {
  Declaration,
  Delivery,
  ExchangeType,
  Headers,
  HeaderValue,
  MessageProperties,
  SubscriptionStatus,
} from '../transport.js'
import type { Wire } from './wire-values.js'

/** A message as it sits in an in-memory queue. */
export interface StoredMessage {
  readonly body: Uint8Array
  /** The headers as published, integer widths included. */
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly persistent: boolean
  readonly redelivered: boolean
}

export interface QueuedMessage extends StoredMessage {
  /** Publish order within its queue: a classic queue puts a requeued message back by it. */
  readonly seq: number
  /** When the message expires (epoch ms): the queue's `x-message-ttl` or its own `expiration`. */
  readonly expiresAt: number | undefined
  /** How many times a quorum queue has had it back (RabbitMQ's `delivery_count`). */
  readonly returns: number
}

export interface MemoryBinding {
  readonly queue: string
  readonly routingKey: string
  /** The arguments as the broker keys them: two bindings differ when these do. */
  readonly identity: string
  /** For a headers exchange: the match mode and the table to match. */
  readonly match: HeadersMatch | undefined
}

export interface MemoryExchange {
  readonly name: string
  readonly type: ExchangeType
  readonly durable: boolean
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly bindings: MemoryBinding[]
}

export interface MemoryQueue {
  readonly name: string
  readonly type: 'classic' | 'quorum'
  readonly durable: boolean
  readonly arguments: Readonly<Record<string, HeaderValue>>
  readonly ttlMs: number | undefined
  /** Returns before a quorum queue drops or dead-letters a message; undefined: no limit. */
  readonly deliveryLimit: number | undefined
  readonly consumerTimeoutMs: number | undefined
  /** Ready messages, in delivery order. */
  readonly ready: QueuedMessage[]
  /** A quorum queue's returned messages lead `ready`: how many of them there are. */
  returned: number
  readonly subscriptions: MemorySubscription[]
  next: number
  nextSeq: number
  timer: ReturnType<typeof setTimeout> | undefined
  timerDue: number
}

export interface MemorySubscription {
  readonly queue: MemoryQueue
  readonly prefetch: number
  readonly onDelivery: (delivery: Delivery) => void
  readonly onStatus: ((status: SubscriptionStatus) => void) | undefined
  /** Deliveries not yet settled, in delivery order. */
  readonly unacked: Set<InFlightDelivery>
  /** The subscription's channel: every loss starts a new one, and voids the old deliveries. */
  epoch: number
  channelOpen: boolean
  cancelled: boolean
  closed: boolean
}

export interface InFlightDelivery {
  readonly message: QueuedMessage
  readonly subscription: MemorySubscription
  readonly epoch: number
  settled: boolean
  timer: ReturnType<typeof setTimeout> | undefined
}

export type DeathReason = 'expired' | 'rejected' | 'delivery_limit'

/** A headers binding's `x-match`. */
export type XMatch = 'all' | 'any' | 'all-with-x' | 'any-with-x'

/** What a headers binding matches: its mode and its arguments as wire values. */
export interface HeadersMatch {
  readonly mode: XMatch
  readonly table: readonly (readonly [string, Wire])[]
}

/** A declaration the broker refuses, in the words the AMQP transport uses. */
export function refused(declaration: Declaration, reply: string): AceMqError {
  const what =
    declaration.kind === 'binding'
      ? `the binding of queue '${declaration.queue}' to exchange '${declaration.exchange}' with routing key '${declaration.routingKey}'`
      : `${declaration.kind} '${declaration.name}'`
  return new AceMqError(`the in-memory broker refused to declare ${what}: ${reply}`, {
    code: ErrorCodes.DECLARATION_FAILED,
  })
}

/** A second declaration of an exchange or queue that differs from the first in `what`. */
export function inequivalent(
  declaration: Extract<Declaration, { kind: 'exchange' | 'queue' }>,
  what: string,
): AceMqError {
  return refused(
    declaration,
    `PRECONDITION_FAILED - inequivalent arg '${what}' for ${declaration.kind} '${declaration.name}'`,
  )
}
