import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { AceMqError } from '../../src/index.js'
import { QueueReader } from '../../src/replay/queue-reader.js'
import type { Delivery } from '../../src/spi.js'

// Reading a queue through a subscription of its own (a quorum queue with a single active
// consumer refuses basic.get), on a fake clock and a broker double that pushes when the test
// says: how long the reader waits for a message, for the rest of the queue, and for the broker
// to count what was given back.

const START = Date.UTC(2030, 0, 1)

/** A queue read by subscribing: `ready` waits to be pushed; given back, a message counts after `returnLagMs`. */
class PushedQueue {
  readonly ready: string[]
  readonly nacked: string[] = []
  returnLagMs = 0
  returned = 0
  cancelled = false
  closedAt: number | undefined
  #onDelivery: ((delivery: Delivery) => void) | undefined
  readonly #pushedAtOnce: number

  constructor(ids: readonly string[], pushedAtOnce: number) {
    this.ready = [...ids]
    this.#pushedAtOnce = pushedAtOnce
  }

  get transport(): ConstructorParameters<typeof QueueReader>[0] {
    const transport = {
      kind: 'pushed',
      getOne: async (): Promise<Delivery | undefined> => {
        throw new AceMqError('basic.get refused', { cause: new Error('RESOURCE_LOCKED') })
      },
      queueLength: async (): Promise<number> => this.ready.length + this.returned,
      consume: async (_queue: string, _options: unknown, onDelivery: (d: Delivery) => void) => {
        this.#onDelivery = onDelivery
        this.push(this.#pushedAtOnce)
        return {
          cancel: async () => {
            this.cancelled = true
          },
          close: async () => {
            this.closedAt = Date.now() - START
          },
        }
      },
    }
    return transport as unknown as ConstructorParameters<typeof QueueReader>[0]
  }

  push(count: number): void {
    for (let i = 0; i < count && !this.cancelled; i++) {
      const id = this.ready.shift()
      if (id === undefined) return
      this.#onDelivery?.({
        body: Buffer.from(id),
        headers: { 'x-acemq-id': id },
        properties: {},
        exchange: '',
        routingKey: 'q',
        redelivered: false,
        settleable: true,
        ack: () => true,
        nack: () => {
          this.nacked.push(id)
          if (Number.isFinite(this.returnLagMs)) {
            setTimeout(() => this.returned++, this.returnLagMs)
          }
          return true
        },
      } as unknown as Delivery)
    }
  }
}

/** When `promise` settles, ms after START, and with what (undefined while it has not). */
function watch<T>(promise: Promise<T>): { at: number | undefined; value: T | undefined } {
  const seen: { at: number | undefined; value: T | undefined } = { at: undefined, value: undefined }
  void promise.then((value) => {
    seen.at = Date.now() - START
    seen.value = value
  })
  return seen
}

const idOf = (delivery: Delivery | undefined): unknown => delivery?.headers['x-acemq-id']

beforeEach(() => {
  vi.useFakeTimers({ now: START, toFake: ['setTimeout', 'clearTimeout', 'Date'] })
})

afterEach(() => {
  vi.useRealTimers()
})

describe('a queue read by subscribing', () => {
  it('hands out what was pushed at once, and waits for a message pushed late while the queue still has it', async () => {
    const queue = new PushedQueue(['a', 'b'], 1)
    const reader = new QueueReader(queue.transport, 'q')
    const first = watch(reader.next())
    await vi.advanceTimersByTimeAsync(0)
    expect([first.at, idOf(first.value)]).toEqual([0, 'a'])
    const second = watch(reader.next())
    await vi.advanceTimersByTimeAsync(119)
    expect(second.at).toBeUndefined()
    queue.push(1)
    await vi.advanceTimersByTimeAsync(0)
    // Woken by the push, not at the end of its 50 ms wait.
    expect([second.at, idOf(second.value)]).toEqual([119, 'b'])
    const end = watch(reader.next())
    await vi.advanceTimersByTimeAsync(100)
    expect(end.at).toBe(219)
    expect(end.value).toBeUndefined()
    const back = watch(reader.giveBack())
    // Closed once the broker has counted them back (at the next look, 50 ms on).
    await vi.advanceTimersByTimeAsync(49)
    expect(back.at).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    expect(back.value).toEqual({ returned: 2, cycled: false })
    expect(queue.nacked).toEqual(['a', 'b'])
    expect(queue.cancelled).toBe(true)
  })

  it('gives up on a message the queue has but never pushes after 5 s', async () => {
    const queue = new PushedQueue(['a', 'b'], 1)
    const reader = new QueueReader(queue.transport, 'q')
    expect(idOf(await reader.next())).toBe('a')
    const stuck = watch(reader.next())
    await vi.advanceTimersByTimeAsync(4_999)
    expect(stuck.at).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    expect(stuck.at).toBe(5_000)
    expect(stuck.value).toBeUndefined()
  })

  it('waits, giving back, until the rest of the queue was pushed, then gives all of it back in order', async () => {
    const queue = new PushedQueue(['a', 'b', 'c'], 1)
    const reader = new QueueReader(queue.transport, 'q')
    expect(idOf(await reader.next())).toBe('a')
    const back = watch(reader.giveBack())
    await vi.advanceTimersByTimeAsync(300)
    expect(back.at).toBeUndefined()
    expect(queue.cancelled).toBe(false)
    queue.push(2)
    await vi.advanceTimersByTimeAsync(100)
    expect(back.value).toEqual({ returned: 3, cycled: false })
    expect(queue.nacked).toEqual(['a', 'b', 'c'])
  })

  it('closes its subscription only once the broker counts what was given back', async () => {
    const queue = new PushedQueue(['a', 'b'], 2)
    queue.returnLagMs = 300
    const reader = new QueueReader(queue.transport, 'q')
    await reader.next()
    const back = watch(reader.giveBack())
    await vi.advanceTimersByTimeAsync(299)
    expect(queue.closedAt).toBeUndefined()
    await vi.advanceTimersByTimeAsync(51)
    expect(queue.closedAt).toBe(300)
    expect(back.value).toEqual({ returned: 2, cycled: false })
  })

  it('gives up waiting for a push after 5 s, and for the broker to count the give-back after 5 s more', async () => {
    // c is never pushed, and the broker never counts a and b back.
    const queue = new PushedQueue(['a', 'b', 'c'], 2)
    queue.returnLagMs = Number.POSITIVE_INFINITY
    const reader = new QueueReader(queue.transport, 'q')
    await reader.next()
    const back = watch(reader.giveBack())
    await vi.advanceTimersByTimeAsync(4_999)
    expect(queue.cancelled).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    expect(queue.cancelled).toBe(true)
    expect(queue.nacked).toEqual(['a', 'b'])
    await vi.advanceTimersByTimeAsync(4_999)
    expect(queue.closedAt).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    expect(queue.closedAt).toBe(10_000)
    expect(back.value).toEqual({ returned: 2, cycled: false })
  })
})
