import { readEnvelope } from '../envelope/envelope.js'
import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'
import { sleep } from '../internal/timers.js'
import type { Delivery, Transport, TransportSubscription } from '../transport/transport.js'

/**
 * How long a reader that had to subscribe waits for the first message of a queue that has
 * some: none in that time means another consumer is the queue's single active consumer.
 */
export const LOCKED_QUEUE_WAIT_MS = 1_000

/** The most a subscription may hold unacknowledged (AMQP's prefetch count is 16 bits). */
const MAX_PREFETCH = 65_535

/** What giving messages back cost: how many returns the queue counted, and why. */
export interface GiveBack {
  /**
   * Messages handed back to the queue (each a return; RabbitMQ 4.0 to 4.2 count every return
   * toward a quorum queue's delivery limit).
   */
  readonly returned: number
  /**
   * Whether the queue puts a message given back behind the others (a quorum queue on
   * RabbitMQ 3.x), so the rest of the queue was taken and given back too, to keep the order.
   */
  readonly cycled: boolean
}

/**
 * Reads a queue from its head, one unacknowledged message at a time, and gives back the
 * messages it did not remove in the order they were in (docs/design.md §18).
 *
 * A classic queue puts a message given back in its place, and a RabbitMQ 4 quorum queue at
 * the head, after those given back before it: giving them back first to last keeps the order
 * on both. A RabbitMQ 3.x quorum queue puts it behind every message waiting, so the order is
 * kept only if the whole queue goes round: the reader finds out which kind of queue it reads
 * by giving back the first message and looking at the head, and when that message is not
 * there, takes the rest of the queue up to it, then gives everything back first to last.
 */
export class QueueReader {
  readonly #transport: Required<Pick<Transport, 'getOne' | 'queueLength'>> & Transport
  readonly #queue: string
  /** Taken and neither removed nor given back yet, in the order they were taken. */
  readonly #held: Delivery[] = []
  #exhausted = false
  /** Set once `basic.get` was refused: the messages come from a subscription instead. */
  #subscribed: Subscribed | undefined

  constructor(
    transport: Required<Pick<Transport, 'getOne' | 'queueLength'>> & Transport,
    queue: string,
  ) {
    this.#transport = transport
    this.#queue = queue
  }

  /** The next message at the head, held until it is removed or given back; undefined at the end. */
  async next(): Promise<Delivery | undefined> {
    if (this.#exhausted) return undefined
    const delivery = await this.#take()
    if (delivery === undefined) this.#exhausted = true
    else this.#held.push(delivery)
    return delivery
  }

  async #take(): Promise<Delivery | undefined> {
    if (this.#subscribed !== undefined) return this.#subscribed.next()
    try {
      return await this.#transport.getOne(this.#queue)
    } catch (error) {
      if (!isLocked(error) || this.#held.length > 0) throw error
      // A quorum queue with a single active consumer refuses basic.get (RESOURCE_LOCKED), but
      // not a consumer: read it by subscribing (docs/design.md §18).
      this.#subscribed = await Subscribed.open(this.#transport, this.#queue, error)
      return this.#subscribed.next()
    }
  }

  /** Removes a message it took (acks it): it is not given back. */
  remove(delivery: Delivery): void {
    this.#forget(delivery)
    delivery.ack()
  }

  /** Gives back every message still held, in the order the queue had them. */
  async giveBack(): Promise<GiveBack> {
    const subscribed = this.#subscribed
    if (subscribed !== undefined) {
      this.#held.length = 0
      return subscribed.giveBack()
    }
    const held = this.#held.splice(0)
    const first = held[0]
    if (first === undefined) return { returned: 0, cycled: false }
    // Everything up to the end of the queue is held: first to last keeps the order anywhere.
    if (this.#exhausted) return { returned: nackAll(held), cycled: false }
    first.nack(true)
    let head: Delivery | undefined
    try {
      head = await this.#transport.getOne(this.#queue)
    } catch (error) {
      nackAll(held.slice(1))
      throw error
    }
    if (head === undefined || sameMessage(head, first)) {
      const rest = held.slice(1)
      return { returned: 1 + nackAll(head === undefined ? rest : [head, ...rest]), cycled: false }
    }
    // The first message went behind the others: take the queue round to it.
    const round: Delivery[] = [head]
    let again: Delivery | undefined
    let returned = 1
    try {
      for (;;) {
        const next = await this.#transport.getOne(this.#queue)
        if (next === undefined) break
        if (sameMessage(next, first)) {
          again = next
          break
        }
        round.push(next)
      }
    } finally {
      const inOrder = [...(again === undefined ? [] : [again]), ...held.slice(1), ...round]
      returned += nackAll(inOrder)
    }
    return { returned, cycled: true }
  }

  #forget(delivery: Delivery): void {
    const index = this.#held.indexOf(delivery)
    if (index >= 0) this.#held.splice(index, 1)
  }
}

/**
 * A queue read through a subscription of its own (a quorum queue with a single active
 * consumer). It can only be read whole: the broker pushes every message to it; giving back
 * waits until none is left ready, cancels the subscription, so nothing comes back to it, then
 * gives back everything first to last, which keeps the order on every kind of queue.
 */
class Subscribed {
  readonly #transport: Required<Pick<Transport, 'queueLength'>> & Transport
  readonly #queue: string
  readonly #subscription: TransportSubscription
  readonly #state: PushedState

  private constructor(
    transport: Required<Pick<Transport, 'queueLength'>> & Transport,
    queue: string,
    subscription: TransportSubscription,
    state: PushedState,
  ) {
    this.#transport = transport
    this.#queue = queue
    this.#subscription = subscription
    this.#state = state
  }

  static async open(
    transport: Required<Pick<Transport, 'queueLength'>> & Transport,
    queue: string,
    refusal: unknown,
  ): Promise<Subscribed> {
    const state: PushedState = { arrived: [], all: [], wake: undefined }
    const subscription = await transport.consume(queue, { prefetch: MAX_PREFETCH }, (delivery) => {
      state.all.push(delivery)
      state.arrived.push(delivery)
      state.wake?.()
    })
    const reader = new Subscribed(transport, queue, subscription, state)
    const waiting = await transport.queueLength(queue)
    if (waiting > 0 && !(await reader.#arrival(LOCKED_QUEUE_WAIT_MS))) {
      await subscription.close().catch(() => undefined)
      throw new AceMqError(
        `cannot look into queue '${queue}': it has a single active consumer on another connection, which alone gets its ${waiting} waiting message(s) (a quorum queue with a single active consumer refuses basic.get). A halted ordered partition's process holds its head: stop that process, and the message goes back in its place; its health report says which partition halted.`,
        { code: ErrorCodes.INVALID_STATE, cause: refusal },
      )
    }
    return reader
  }

  /** Whether a message is there, or arrives within `ms`. */
  async #arrival(ms: number): Promise<boolean> {
    if (this.#state.arrived.length > 0) return true
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      this.#state.wake = () => {
        clearTimeout(timer)
        resolve()
      }
    })
    this.#state.wake = undefined
    return this.#state.arrived.length > 0
  }

  /** The next message pushed, or undefined once none is left ready on the queue. */
  async next(): Promise<Delivery | undefined> {
    const deadline = Date.now() + LOCKED_QUEUE_WAIT_MS * 5
    while (Date.now() < deadline) {
      if (await this.#arrival(QUIET_MS)) return this.#state.arrived.shift()
      if ((await this.#transport.queueLength(this.#queue)) === 0) {
        return (await this.#arrival(QUIET_MS)) ? this.#state.arrived.shift() : undefined
      }
    }
    return undefined
  }

  async giveBack(): Promise<GiveBack> {
    // The whole queue first: a message not yet pushed would stay ahead of those given back.
    const deadline = Date.now() + LOCKED_QUEUE_WAIT_MS * 5
    while (Date.now() < deadline && (await this.#transport.queueLength(this.#queue)) > 0) {
      await sleep(QUIET_MS)
    }
    // Nothing may come back to this subscription while it gives back.
    await this.#subscription.cancel()
    // Everything pushed, looked at or not, except what was removed: first to last.
    const back = this.#state.all.filter((delivery) => delivery.settleable !== false)
    nackAll(back)
    // Closing before the broker has them all back would return the rest by the channel's
    // close, ahead of the ones given back (a quorum queue applies the two separately).
    const settled = Date.now() + LOCKED_QUEUE_WAIT_MS * 5
    while (Date.now() < settled && (await this.#transport.queueLength(this.#queue)) < back.length) {
      await sleep(QUIET_MS)
    }
    await this.#subscription.close()
    return { returned: back.length, cycled: false }
  }
}

/** What a subscription was pushed: all of it in order, and what is not taken yet. */
interface PushedState {
  readonly arrived: Delivery[]
  readonly all: Delivery[]
  wake: (() => void) | undefined
}

/** How long a subscription that has been pushed nothing more counts as having had it all. */
const QUIET_MS = 50

/** `basic.get` refused on a quorum queue with a single active consumer (AMQP 405). */
function isLocked(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; depth++) {
    if ((e as { code?: unknown }).code === 405 || /RESOURCE[_-]LOCKED/.test(e.message)) return true
    e = e.cause
  }
  return false
}

function nackAll(deliveries: readonly Delivery[]): number {
  for (const delivery of deliveries) delivery.nack(true)
  return deliveries.length
}

/** The message given back, taken again: redelivered, with the same id and body. */
function sameMessage(taken: Delivery, given: Delivery): boolean {
  return taken.redelivered && idOf(taken) === idOf(given) && sameBytes(taken.body, given.body)
}

function idOf(delivery: Delivery): string | undefined {
  const explicit = delivery.headers['x-acemq-id'] ?? delivery.properties.messageId
  if (explicit === undefined) return undefined
  return readEnvelope(delivery.headers, {
    messageId: delivery.properties.messageId,
    routingKey: delivery.routingKey,
  }).envelope.id
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b))
}
