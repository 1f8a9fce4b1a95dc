import { InMemoryOutboxStore, InMemoryTransport, type OutboxStore } from '../../src/index.js'
import type { OutgoingMessage, TransportPublishOptions } from '../../src/spi.js'
import { outboxStoreReplacing } from '@acemq/testing'

// Doubles the relay's tests share: a broker that holds publishes, a store whose mark waits.

/** The in-memory transport, with publishes held (as under a memory alarm) while `holding`. */
export class HoldingTransport extends InMemoryTransport {
  holding = false
  #release: () => void = () => undefined
  #held = new Promise<void>((resolve) => (this.#release = resolve))

  /** Lets every publish held so far, and any to come, go on. */
  releaseHeld(): void {
    this.#release()
  }

  /** Waits while publishes are held. */
  async whileHeld(): Promise<void> {
    if (this.holding) await this.#held
  }

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    await this.whileHeld()
    return super.publish(message, options)
  }
}

/** `inner`, with a `markPublished` that waits at a gate the test opens. */
export function gatedMarks(inner: InMemoryOutboxStore): {
  readonly store: OutboxStore
  /** Whether a mark has reached the gate. */
  marking(): boolean
  open(): void
} {
  let open: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (open = resolve))
  let marking = false
  const store = outboxStoreReplacing(inner, {
    markPublished: async (ids) => {
      marking = true
      await gate
      await inner.markPublished(ids)
    },
  })
  return { store, marking: () => marking, open: () => open() }
}

/** How many times each record id reached `queue`. */
export function copiesIn(transport: InMemoryTransport, queue: string): Map<string, number> {
  const counts = new Map<string, number>()
  for (const message of transport.peek(queue)) {
    const id = String(message.properties.messageId)
    counts.set(id, (counts.get(id) ?? 0) + 1)
  }
  return counts
}

/** The record ids that reached `queue` more than once, sorted. */
export function sentTwice(transport: InMemoryTransport, queue: string): string[] {
  return [...copiesIn(transport, queue).entries()]
    .filter(([, n]) => n > 1)
    .map(([id]) => id)
    .sort()
}
