import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { Options } from 'amqplib'

/** The origin every message in the benchmark carries, as `@acemq` would write it. */
export const ORIGIN = `acemq@${hostname() || 'localhost'}`

/** A realistic order event: ~300 bytes of JSON. */
export interface OrderPlaced {
  readonly orderId: string
  readonly customerId: string
  readonly placedAt: string
  readonly currency: string
  readonly total: number
  readonly items: readonly {
    readonly sku: string
    readonly quantity: number
    readonly price: number
  }[]
  readonly note: string
}

export function order(i: number): OrderPlaced {
  return {
    orderId: `o-${i.toString().padStart(8, '0')}`,
    customerId: `c-${(i % 977).toString().padStart(5, '0')}`,
    placedAt: '2024-05-01T12:34:56.789Z',
    currency: 'EUR',
    total: 129.97,
    items: [
      { sku: 'SKU-0001-RED-M', quantity: 1, price: 49.99 },
      { sku: 'SKU-0042-BLU-L', quantity: 2, price: 29.99 },
      { sku: 'SKU-0777-BLK-S', quantity: 1, price: 20.0 },
    ],
    note: 'leave at the door, ring twice',
  }
}

/**
 * The envelope headers `@acemq` writes on a first publish (docs/design.md §4), written out literally the
 * way a raw amqplib user would have to: the same bytes on the wire as the library's publish.
 */
export function envelopeHeaders(id: string, type: string): Record<string, unknown> {
  return {
    'x-acemq-id': id,
    'x-acemq-type': type,
    'x-acemq-version': { '!': 'int', value: 1 },
    'x-acemq-correlation': id,
    'x-acemq-attempt': { '!': 'int', value: 1 },
    'x-acemq-first-seen': { '!': 'long', value: Date.now() },
    'x-acemq-origin': ORIGIN,
  }
}

/** A message as `@acemq` would publish it: JSON body, persistent, mandatory, envelope headers. */
export function acemqShapedMessage(
  i: number,
  queue: string,
  bytes?: number,
): { content: Buffer; options: Options.Publish } {
  const id = randomUUID()
  return {
    content: bytes === undefined ? Buffer.from(JSON.stringify(order(i))) : paddedOrder(i, bytes),
    options: {
      persistent: true,
      mandatory: true,
      contentType: 'application/json',
      messageId: id,
      headers: envelopeHeaders(id, queue),
    },
  }
}

/** The order as JSON of exactly `bytes` bytes (at least its own size): a `pad` string fills it. */
export function paddedOrder(i: number, bytes: number): Buffer {
  const plain = JSON.stringify({ ...order(i), pad: '' })
  return Buffer.from(
    JSON.stringify({ ...order(i), pad: 'x'.repeat(Math.max(0, bytes - plain.length)) }),
  )
}
