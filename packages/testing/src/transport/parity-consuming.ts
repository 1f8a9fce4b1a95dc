import { beforeEach, describe, expect, it } from 'vitest'
import { type Delivery, type Transport, type TransportSubscription } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { QUIET_MS, sleep, flagged, type ParityKit } from './parity-kit.js'

/** Consuming: per-consumer prefetch, where a requeued message goes, the redelivered flag, and a quorum queue's `x-delivery-limit`. */
export function consumingParity(kit: ParityKit): void {
  const {
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
  } = kit
  let t: Transport
  beforeEach(() => {
    t = kit.transport()
  })

  /**
   * A new queue (classic, or quorum with a delivery limit of 5) holding m1 to m5, the first
   * three delivered to a subscription of prefetch 3 that is then cancelled.
   */
  async function threeOfFiveTaken(kind: 'classic' | 'quorum'): Promise<{
    readonly q: string
    readonly deliveries: readonly Delivery[]
    readonly subscription: TransportSubscription
  }> {
    const q = fresh(kind)
    await t.declare([kind === 'classic' ? queue(q) : queue(q, 'quorum', { 'x-delivery-limit': 5 })])
    for (let i = 1; i <= 5; i++) await publish('', q, `m${i}`)
    const { deliveries, subscription } = await subscribe(q, 3)
    await eventually(() => deliveries.length === 3)
    await subscription.cancel()
    return { q, deliveries, subscription }
  }

  describe('consuming', () => {
    it('hands each consumer no more than its own prefetch, and 0 means no limit', async () => {
      const q = fresh('q')
      await t.declare([queue(q)])
      for (let i = 1; i <= 6; i++) await publish('', q, `m${i}`)
      const first = await subscribe(q, 2)
      const second = await subscribe(q, 1)
      await eventually(() => first.deliveries.length + second.deliveries.length === 3)
      await sleep(QUIET_MS)
      expect([first.deliveries.length, second.deliveries.length]).toEqual([2, 1])
      first.deliveries[0]?.ack()
      await eventually(() => first.deliveries.length === 3)
      await sleep(QUIET_MS)
      expect(second.deliveries.length).toBe(1)
      await closeSubscription(second.subscription)
      const unlimited = await subscribe(q, 0)
      await eventually(() => unlimited.deliveries.length === 3, 10_000, 'the rest at once')
    })

    it('puts requeued messages of a classic queue back in their original positions, redelivered', async () => {
      const { q, deliveries } = await threeOfFiveTaken('classic')
      for (const i of [1, 0, 2]) deliveries[i]?.nack(true)
      expect(await bodies(q, 5)).toEqual(['m1*', 'm2*', 'm3*', 'm4', 'm5'])
    })

    it('requeues to the head of a quorum queue with a delivery limit, in the order returned, counting each', async () => {
      const { q, deliveries } = await threeOfFiveTaken('quorum')
      for (const i of [1, 0, 2]) deliveries[i]?.nack(true)
      const again = await take(q, 5)
      expect(again.map(flagged)).toEqual(['m2*', 'm1*', 'm3*', 'm4', 'm5'])
      expect(again.map((s) => s.headers['x-delivery-count'])).toEqual([
        1,
        1,
        1,
        undefined,
        undefined,
      ])
    })

    it("returns a closed channel's deliveries to a quorum queue's head after those already returned", async () => {
      const { q, deliveries, subscription } = await threeOfFiveTaken('quorum')
      deliveries[2]?.nack(true)
      await sleep(QUIET_MS)
      await closeSubscription(subscription)
      expect(await bodies(q, 5)).toEqual(['m3*', 'm1*', 'm2*', 'm4', 'm5'])
    })

    it('redelivers a requeued message with the redelivered flag set', async () => {
      const q = fresh('q')
      await t.declare([queue(q)])
      await publish('', q, 'again')
      const { deliveries } = await subscribe(q, 1)
      await eventually(() => deliveries.length === 1)
      expect(deliveries[0]?.redelivered).toBe(false)
      expect(deliveries[0]?.nack(true)).toBe(true)
      await eventually(() => deliveries.length === 2)
      expect(deliveries[1]?.redelivered).toBe(true)
      deliveries[1]?.ack()
    })

    it('fails to consume from a queue that does not exist', async () => {
      await expect(t.consume(fresh('missing'), { prefetch: 1 }, () => undefined)).rejects.toThrow(
        /NOT_FOUND/,
      )
    })
  })

  describe('x-delivery-limit on a quorum queue', () => {
    it('redelivers with x-delivery-count until the limit, then dead-letters with reason delivery_limit', async () => {
      const dlx = fresh('dlx')
      const [q, dead] = [fresh('limited'), fresh('dead')]
      await t.declare([
        exchange(dlx, 'direct'),
        queue(dead),
        binding(dead, dlx, q),
        queue(q, 'quorum', { 'x-delivery-limit': 2, 'x-dead-letter-exchange': dlx }),
      ])
      await publish('', q, 'poison', { headers: { app: 1 } })
      const { deliveries } = await subscribe(q, 1)
      for (let n = 1; n <= 3; n++) {
        await eventually(() => deliveries.length === n, 10_000, `delivery ${n}`)
        deliveries[n - 1]?.nack(true)
      }
      await readyIs(dead, 1)
      await sleep(QUIET_MS)
      expect(deliveries.map((d) => [d.redelivered, d.headers['x-delivery-count']])).toEqual([
        [false, undefined],
        [true, 1],
        [true, 2],
      ])
      const [copy] = await take(dead, 1)
      expect(copy).toMatchObject({ exchange: dlx, routingKey: q, redelivered: false })
      expect(copy?.headers).toEqual({
        app: 1,
        'x-death': [
          {
            count: 1,
            reason: 'delivery_limit',
            queue: q,
            time: { '!': 'timestamp', value: expect.any(Number) },
            exchange: '',
            'routing-keys': [q],
          },
        ],
        'x-first-death-exchange': '',
        'x-first-death-queue': q,
        'x-first-death-reason': 'delivery_limit',
      })
    })

    it('drops the message past the limit when the queue has no dead-letter exchange', async () => {
      const q = fresh('limited')
      await t.declare([queue(q, 'quorum', { 'x-delivery-limit': 1 })])
      await publish('', q, 'poison')
      const { deliveries } = await subscribe(q, 1)
      for (let n = 1; n <= 2; n++) {
        await eventually(() => deliveries.length === n, 10_000, `delivery ${n}`)
        deliveries[n - 1]?.nack(true)
      }
      await readyIs(q, 0)
      await sleep(QUIET_MS)
      expect(deliveries).toHaveLength(2)
    })

    it('counts a delivery returned by a closed channel toward the limit', async () => {
      const [q, dead] = [fresh('limited'), fresh('dead')]
      await t.declare([
        queue(dead),
        queue(q, 'quorum', {
          'x-delivery-limit': 1,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': dead,
        }),
      ])
      await publish('', q, 'abandoned')
      const counts: unknown[] = []
      for (let round = 0; round < 2; round++) {
        const { deliveries, subscription } = await subscribe(q, 1)
        await eventually(() => deliveries.length === 1, 10_000, `delivery ${round + 1}`)
        counts.push(deliveries[0]?.headers['x-delivery-count'])
        await closeSubscription(subscription)
      }
      await readyIs(dead, 1)
      expect(counts).toEqual([undefined, 1])
      const [copy] = await take(dead, 1)
      expect(copy?.headers['x-first-death-reason']).toBe('delivery_limit')
    })
  })
}
