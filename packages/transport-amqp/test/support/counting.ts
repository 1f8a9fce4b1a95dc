import { PublishFailedError } from '@acemq/core'
import type { Delivery } from '@acemq/core/spi'
import type { AmqpTransport } from '../../src/index.js'
import { message, text } from './harness.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Deliveries of one queue, counted by body: every one acked as it arrives. */
export function tally(): {
  readonly counts: Map<string, number>
  deliveries: number
  redelivered: number
  onDelivery(delivery: Delivery): void
} {
  const state = {
    counts: new Map<string, number>(),
    deliveries: 0,
    redelivered: 0,
    onDelivery(delivery: Delivery) {
      const id = text(delivery)
      state.counts.set(id, (state.counts.get(id) ?? 0) + 1)
      state.deliveries += 1
      if (delivery.redelivered) state.redelivered += 1
      delivery.ack()
    },
  }
  return state
}

/**
 * Publishes `ids` with `inFlight` at a time, each until it is confirmed: a publish that fails
 * (the connection went, so it may or may not have arrived) is sent again, as a caller must.
 * Returns the confirmed ids and how many publishes were sent again.
 */
export async function publishUntilConfirmed(
  transport: AmqpTransport,
  queue: string,
  ids: readonly string[],
  inFlight: number,
  onConfirmed: (confirmed: number) => void = () => undefined,
): Promise<{ confirmed: Set<string>; republished: number; refused: number }> {
  const confirmed = new Set<string>()
  let republished = 0
  let refused = 0
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++] as string
      let lostOnce = false
      for (;;) {
        try {
          await transport.publish(message(queue, id))
          confirmed.add(id)
          onConfirmed(confirmed.size)
          break
        } catch (error) {
          if (!(error instanceof PublishFailedError)) throw error
          // Refused before writing (recovering) versus lost after writing (may have arrived).
          if (/was not sent/.test(error.message)) refused += 1
          else if (!lostOnce) {
            republished += 1
            lostOnce = true
          }
          await sleep(20)
        }
      }
    }
  }
  await Promise.all(Array.from({ length: inFlight }, worker))
  return { confirmed, republished, refused }
}
