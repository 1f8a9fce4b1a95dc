import type { Channel, ConsumeMessage } from 'amqplib'

/**
 * One delivery's place in its channel's order: `open` until the consumer settles it, `ack`
 * while its ack waits to be written, `written` once its ack or nack is on the wire. A written
 * slot lets go of its message: it stays in the order until the next compaction, and would
 * otherwise keep a message the consumer has finished with alive through every minor GC.
 */
export interface AckSlot {
  message: ConsumeMessage | undefined
  state: 'open' | 'ack' | 'written'
}

/** A slot whose ack or nack is on the wire: it lets go of its message. */
function written(slot: AckSlot): void {
  slot.state = 'written'
  slot.message = undefined
}

/** The fewest slots the order grows by before the ones already written are dropped. */
const COMPACT_AFTER = 1_024

/**
 * The acknowledgements of one consumer channel, batched. An ack is held until the end of the
 * event-loop turn (or until half the prefetch window is waiting), then every delivery at the
 * head of the channel's order that is settled — and only those — is acknowledged by one
 * `basic.ack` with `multiple` set, on the last of them: a multiple ack also acknowledges every
 * earlier delivery the broker still holds unacknowledged, so it is written only when none of
 * those is open. Acks behind a delivery still open are written one by one at the same time:
 * holding them until it settles would keep the prefetch window full behind a slow handler.
 * A nack is written at once, after the acks held before it, so frames keep the order the
 * consumer settled in.
 *
 * Holding an ack to the end of the turn (a `setImmediate`, the loop's check phase) gathers the
 * acks of every callback of the iteration: handlers that finish in separate timer or I/O
 * callbacks (a handler awaiting I/O) still share one frame. The cost is at most one loop
 * iteration on the wire: amqplib writes a channel's frames at a `setImmediate` of its own (its
 * mux), and one asked for from inside ours runs in the next iteration. Flushing at
 * `process.nextTick` instead, tried and measured (bench/NOTES.md, 2026-12-06), sent one ack per
 * message with such handlers — 8 × the bytes and 2.7 × the packets to the broker at 5k msgs/s —
 * for no latency gain that could be measured. An ack held when the channel is
 * lost is not written, and the broker redelivers that message, as it does for an ack still in
 * amqplib's buffers; closing the channel on purpose writes the held acks first ({@link flush}).
 */
export class ChannelAcks {
  readonly #channel: Channel
  readonly #limit: number
  #slots: AckSlot[] = []
  #head = 0
  /** Acks asked for and not written yet. */
  #held = 0
  #scheduled = false
  /** The order is compacted once it holds this many slots from the head on. */
  #compactAt = COMPACT_AFTER

  constructor(channel: Channel, prefetch: number) {
    this.#channel = channel
    // Half the window: the broker sends more while the rest is still being handled. With
    // prefetch 1 (or 2) every ack is written at once — there is nothing to batch.
    this.#limit = prefetch === 0 ? 1_000 : Math.ceil(prefetch / 2)
  }

  /**
   * Slots kept in memory: deliveries still open or held, and written ones not yet dropped (those
   * before the head among them), so that a test sees what the order costs.
   */
  get tracked(): number {
    return this.#slots.length
  }

  /** Messages the order still holds: deliveries open, or whose ack is held and not written. */
  get retained(): number {
    return this.#slots.filter((slot) => slot.message !== undefined).length
  }

  /** A delivery arrived on the channel: it takes the next place in the order. */
  track(message: ConsumeMessage): AckSlot {
    const slot: AckSlot = { message, state: 'open' }
    this.#slots.push(slot)
    return slot
  }

  /** Holds the ack of `slot` until the end of this turn (or writes the batch now, when full). */
  ack(slot: AckSlot): void {
    slot.state = 'ack'
    this.#held += 1
    if (this.#held >= this.#limit) this.flush()
    else if (!this.#scheduled) {
      this.#scheduled = true
      setImmediate(() => {
        this.#scheduled = false
        this.#tryFlush()
      })
    }
  }

  /** Writes the acks held so far, then the nack of `slot`. Throws when the channel is closed. */
  nack(slot: AckSlot, requeue: boolean): void {
    this.flush()
    this.#channel.nack(slot.message as ConsumeMessage, false, requeue)
    written(slot)
    this.#advance()
  }

  /** Writes every held ack: one multiple ack for the settled run at the head, the rest singly. */
  flush(): void {
    if (this.#held === 0) return
    this.#held = 0
    const slots = this.#slots
    let last: ConsumeMessage | undefined
    let i = this.#head
    for (; i < slots.length; i++) {
      const slot = slots[i] as AckSlot
      if (slot.state === 'open') break
      if (slot.state === 'ack') {
        last = slot.message
        written(slot)
      }
    }
    this.#head = i
    // On the last held ack of the run, never on one already written (the broker would refuse
    // a multiple ack on a tag it no longer holds).
    if (last !== undefined) this.#channel.ack(last, true)
    for (; i < slots.length; i++) {
      const slot = slots[i] as AckSlot
      if (slot.state !== 'ack') continue
      const message = slot.message as ConsumeMessage
      written(slot)
      this.#channel.ack(message, false)
    }
    this.#compact()
  }

  /** The end-of-turn flush: a channel closed meanwhile has handed the messages back already. */
  #tryFlush(): void {
    try {
      this.flush()
    } catch {
      // The channel closed: the broker redelivers what was not acknowledged.
    }
  }

  #advance(): void {
    const slots = this.#slots
    while (this.#head < slots.length && slots[this.#head]?.state === 'written') this.#head += 1
    this.#compact()
  }

  /**
   * Drops the slots already written. Behind a delivery that stays open (a slow handler) the
   * deliveries after it keep arriving and being acked singly: without this the order would
   * grow with every one of them. Compacting when it has doubled keeps the cost per delivery
   * constant, however large the window.
   */
  #compact(): void {
    if (this.#head === this.#slots.length) {
      this.#slots = []
      this.#head = 0
      return
    }
    if (this.#slots.length - this.#head < this.#compactAt && this.#head < COMPACT_AFTER) return
    this.#slots = this.#slots.slice(this.#head).filter((slot) => slot.state !== 'written')
    this.#head = 0
    this.#compactAt = Math.max(COMPACT_AFTER, 2 * this.#slots.length)
  }
}
