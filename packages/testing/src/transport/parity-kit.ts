import { expect } from 'vitest'
import { errorCodeOf, type AceMqError, type Headers, type HeaderValue } from '@acemq/core'
import {
  type Declaration,
  type Delivery,
  type ExchangeType,
  type MessageProperties,
  type Transport,
  type TransportSubscription,
} from '@acemq/core/spi'
import { eventually, sleep } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'

/** What the parity suite needs from each side: a transport, and the broker's own counts. */
export interface ParityTarget {
  /** A new transport, connected, on a broker (or virtual host) that only this run uses. */
  connect(): Promise<Transport>
  /** Messages ready in `queue` as the broker counts them; undefined when it does not exist. */
  readyCount(transport: Transport, queue: string): Promise<number | undefined>
}

/** A delivery as the assertions compare it: the body as text, the rest as delivered. */
export interface Seen {
  readonly body: string
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly redelivered: boolean
}

export { sleep }

/** How long a test waits, after the deliveries it expects, for any it does not. */
export const QUIET_MS = 150

export const long = (value: number): HeaderValue => ({ '!': 'long', value })

export function seen(delivery: Delivery): Seen {
  return {
    body: Buffer.from(delivery.body).toString(),
    headers: delivery.headers,
    properties: delivery.properties,
    exchange: delivery.exchange,
    routingKey: delivery.routingKey,
    redelivered: delivery.redelivered,
  }
}

/** `m1*` for a redelivered `m1`, `m1` otherwise: an order and its flags in one comparable word. */
export const flagged = (s: Seen): string => (s.redelivered ? `${s.body}*` : s.body)

/** The parity suite's declarations, publishes and takes, on the transport of the running test. */
export function parityKit(
  target: ParityTarget,
  transport: () => Transport,
  open: TransportSubscription[],
) {
  const fresh = (kind: string): string => uniqueName(`parity.${kind}`)

  const exchange = (
    exchangeName: string,
    type: ExchangeType,
    args: Record<string, HeaderValue> = {},
    durable = true,
  ): Declaration => ({ kind: 'exchange', name: exchangeName, type, durable, arguments: args })

  const queue = (
    queueName: string,
    type: 'classic' | 'quorum' = 'classic',
    args: Record<string, HeaderValue> = {},
    durable = true,
  ): Declaration => ({ kind: 'queue', name: queueName, type, durable, arguments: args })

  const binding = (
    queueName: string,
    exchangeName: string,
    routingKey: string,
    args: Record<string, HeaderValue> = {},
  ): Declaration => ({
    kind: 'binding',
    queue: queueName,
    exchange: exchangeName,
    routingKey,
    arguments: args,
  })

  function publish(
    exchangeName: string,
    routingKey: string,
    body: string,
    options: { headers?: Headers; mandatory?: boolean; properties?: MessageProperties } = {},
  ): Promise<void> {
    return transport().publish({
      exchange: exchangeName,
      routingKey,
      body: Buffer.from(body),
      headers: options.headers ?? {},
      properties: options.properties ?? {},
      persistent: true,
      mandatory: options.mandatory ?? true,
    })
  }

  /** A live subscription that keeps every delivery for the test to settle. */
  async function subscribe(
    queueName: string,
    prefetch: number,
  ): Promise<{ deliveries: Delivery[]; subscription: TransportSubscription }> {
    const deliveries: Delivery[] = []
    const subscription = await transport().consume(queueName, { prefetch }, (d) =>
      deliveries.push(d),
    )
    open.push(subscription)
    return { deliveries, subscription }
  }

  async function closeSubscription(subscription: TransportSubscription): Promise<void> {
    open.splice(open.indexOf(subscription), 1)
    await subscription.close()
  }

  /** Consumes exactly `count` messages (and checks no more arrive), acks them, and unsubscribes. */
  async function take(queueName: string, count: number): Promise<Seen[]> {
    const { deliveries, subscription } = await subscribe(queueName, 100)
    await eventually(
      () => deliveries.length >= count,
      10_000,
      `${count} deliveries from ${queueName}`,
    )
    await sleep(QUIET_MS)
    for (const delivery of deliveries) delivery.ack()
    await closeSubscription(subscription)
    return deliveries.map(seen)
  }

  async function bodies(queueName: string, count: number): Promise<string[]> {
    return (await take(queueName, count)).map(flagged)
  }

  async function readyIs(queueName: string, count: number): Promise<void> {
    await eventually(
      async () => (await target.readyCount(transport(), queueName)) === count,
      10_000,
      `${count} ready in ${queueName}`,
    )
  }

  async function refusal(work: Promise<unknown>): Promise<AceMqError> {
    const error = await work.then(
      () => undefined,
      (e: unknown) => e,
    )
    // By code, not instanceof: the transport under test may carry another copy of core.
    expect(errorCodeOf(error), String(error)).toBeDefined()
    return error as AceMqError
  }

  return {
    /** The running test's transport. */
    transport,
    target,
    fresh,
    exchange,
    queue,
    binding,
    publish,
    subscribe,
    closeSubscription,
    take,
    bodies,
    readyIs,
    refusal,
  }
}

/** What each section of the parity suite works with. */
export type ParityKit = ReturnType<typeof parityKit>
