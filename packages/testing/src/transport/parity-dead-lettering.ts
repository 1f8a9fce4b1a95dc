import { beforeEach, describe, expect, it } from 'vitest'
import { type Delivery, type Transport } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { sleep, seen, type ParityKit } from './parity-kit.js'

/** Dead-lettering: queue and per-message TTL, `x-death`, and dead-letter cycles. */
export function deadLetteringParity(kit: ParityKit): void {
  const { target, fresh, exchange, queue, binding, publish, subscribe, take, readyIs } = kit
  let t: Transport
  beforeEach(() => {
    t = kit.transport()
  })

  describe('dead-lettering', () => {
    it('dead-letters a message whose queue TTL runs out to the DLX with the dead-letter routing key and x-death', async () => {
      const dlx = fresh('dlx')
      const [wait, waitKeepsKey, targetQueue, sameKey] = [
        fresh('wait'),
        fresh('wait'),
        fresh('target'),
        fresh('target'),
      ]
      await t.declare([
        exchange(dlx, 'direct'),
        queue(targetQueue),
        queue(sameKey),
        binding(targetQueue, dlx, 'to-target'),
        binding(sameKey, dlx, waitKeepsKey),
        queue(wait, 'classic', {
          'x-message-ttl': 100,
          'x-dead-letter-exchange': dlx,
          'x-dead-letter-routing-key': 'to-target',
        }),
        queue(waitKeepsKey, 'quorum', { 'x-message-ttl': 100, 'x-dead-letter-exchange': dlx }),
      ])
      await publish('', wait, 'late', { headers: { app: 'kept' } })
      await publish('', waitKeepsKey, 'late too')
      await readyIs(targetQueue, 1)
      await readyIs(sameKey, 1)
      expect(await target.readyCount(t, wait)).toBe(0)
      const [copy] = await take(targetQueue, 1)
      expect(copy).toMatchObject({
        body: 'late',
        exchange: dlx,
        routingKey: 'to-target',
        redelivered: false,
      })
      expect(copy?.headers).toEqual({
        app: 'kept',
        'x-death': [
          {
            count: 1,
            reason: 'expired',
            queue: wait,
            time: { '!': 'timestamp', value: expect.any(Number) },
            exchange: '',
            'routing-keys': [wait],
          },
        ],
        'x-first-death-exchange': '',
        'x-first-death-queue': wait,
        'x-first-death-reason': 'expired',
      })
      const [kept] = await take(sameKey, 1)
      expect(kept).toMatchObject({ body: 'late too', exchange: dlx, routingKey: waitKeepsKey })
      expect(kept?.headers['x-first-death-queue']).toBe(waitKeepsKey)
    })

    it('dead-letters an expired per-message expiration, keeping it as original-expiration', async () => {
      const [wait, dead] = [fresh('wait'), fresh('dead')]
      await t.declare([
        queue(dead),
        queue(wait, 'classic', {
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': dead,
        }),
      ])
      await publish('', wait, 'short-lived', { properties: { expiration: '50' } })
      await readyIs(dead, 1)
      const [copy] = await take(dead, 1)
      expect(copy?.properties.expiration).toBeUndefined()
      expect(copy?.headers['x-death']).toEqual([
        expect.objectContaining({
          reason: 'expired',
          queue: wait,
          'original-expiration': '50',
        }),
      ])
    })

    it('dead-letters a message nacked without requeue, and counts each death per queue and reason', async () => {
      const [work, wait] = [fresh('work'), fresh('wait')]
      await t.declare([
        queue(work, 'classic', {
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': wait,
        }),
        queue(wait, 'classic', {
          'x-message-ttl': 50,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': work,
        }),
      ])
      await publish('', work, 'bounced')
      const { deliveries } = await subscribe(work, 1)
      for (let round = 1; round <= 2; round++) {
        await eventually(() => deliveries.length === round, 10_000, `delivery ${round}`)
        deliveries[round - 1]?.nack(false)
      }
      await eventually(() => deliveries.length === 3, 10_000, 'the third delivery')
      const third = seen(deliveries[2] as Delivery)
      deliveries[2]?.ack()
      expect(third).toMatchObject({ exchange: '', routingKey: work, redelivered: false })
      const time = { '!': 'timestamp', value: expect.any(Number) }
      expect(third.headers).toEqual({
        'x-death': [
          {
            count: 2,
            reason: 'expired',
            queue: wait,
            time,
            exchange: '',
            'routing-keys': [wait],
          },
          {
            count: 2,
            reason: 'rejected',
            queue: work,
            time,
            exchange: '',
            'routing-keys': [work],
          },
        ],
        'x-first-death-exchange': '',
        'x-first-death-queue': work,
        'x-first-death-reason': 'rejected',
      })
    })

    it('drops a message that would expire around a cycle with no rejection in it', async () => {
      const [self, a, b] = [fresh('self'), fresh('loop'), fresh('loop')]
      await t.declare([
        queue(self, 'classic', { 'x-message-ttl': 100, 'x-dead-letter-exchange': '' }),
        queue(a, 'classic', {
          'x-message-ttl': 100,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': b,
        }),
        queue(b, 'classic', {
          'x-message-ttl': 100,
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': a,
        }),
      ])
      await publish('', self, 'self')
      await publish('', a, 'loop')
      expect(await target.readyCount(t, self)).toBe(1)
      await sleep(600)
      expect(await target.readyCount(t, self)).toBe(0)
      expect(await target.readyCount(t, a)).toBe(0)
      expect(await target.readyCount(t, b)).toBe(0)
    })
  })
}
