import { readEnvelope } from '../envelope/envelope.js'
import type { Delivery, Transport } from '../transport/transport.js'

/** What giving messages back cost: how many returns the queue counted, and why. */
export interface GiveBack {
  /**
   * Messages handed back to the queue (each a return; on RabbitMQ 4 every return counts
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
 * messages it did not remove in the order they were in (docs/design.md §17).
 *
 * A classic queue puts a message given back in its place, and a RabbitMQ 4 quorum queue at
 * the head, after those given back before it: giving them back first to last keeps the order
 * on both. A RabbitMQ 3.x quorum queue puts it behind every message waiting, so the order is
 * kept only if the whole queue goes round: the reader finds out which kind of queue it reads
 * by giving back the first message and looking at the head, and when that message is not
 * there, takes the rest of the queue up to it, then gives everything back first to last.
 */
export class QueueReader {
  readonly #transport: Required<Pick<Transport, 'getOne'>>
  readonly #queue: string
  /** Taken and neither removed nor given back yet, in the order they were taken. */
  readonly #held: Delivery[] = []
  #exhausted = false

  constructor(transport: Required<Pick<Transport, 'getOne'>>, queue: string) {
    this.#transport = transport
    this.#queue = queue
  }

  /** The next message at the head, held until it is removed or given back; undefined at the end. */
  async next(): Promise<Delivery | undefined> {
    if (this.#exhausted) return undefined
    const delivery = await this.#transport.getOne(this.#queue)
    if (delivery === undefined) this.#exhausted = true
    else this.#held.push(delivery)
    return delivery
  }

  /** Removes a message it took (acks it): it is not given back. */
  remove(delivery: Delivery): void {
    this.#forget(delivery)
    delivery.ack()
  }

  /** Gives a message it took back at once (nack with requeue), as a failed copy is. */
  putBack(delivery: Delivery): void {
    this.#forget(delivery)
    delivery.nack(true)
  }

  /** Gives back every message still held, in the order the queue had them. */
  async giveBack(): Promise<GiveBack> {
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
      nackAll(inOrder)
    }
    return { returned: held.length + round.length + 1, cycled: true }
  }

  #forget(delivery: Delivery): void {
    const index = this.#held.indexOf(delivery)
    if (index >= 0) this.#held.splice(index, 1)
  }
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
