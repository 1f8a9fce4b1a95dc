import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  ErrorCodes,
  errorCodeOf,
  type AceMqError,
  type Declaration,
  type Delivery,
  type ExchangeType,
  type Headers,
  type HeaderValue,
  type MessageProperties,
  type Transport,
  type TransportSubscription,
} from '@acemq/core'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'

/** What the parity suite needs from each side: a transport, and the broker's own counts. */
export interface ParityTarget {
  /** A new transport, connected, on a broker (or virtual host) that only this run uses. */
  connect(): Promise<Transport>
  /** Messages ready in `queue` as the broker counts them; undefined when it does not exist. */
  readyCount(transport: Transport, queue: string): Promise<number | undefined>
}

/** A delivery as the assertions compare it: the body as text, the rest as delivered. */
interface Seen {
  readonly body: string
  readonly headers: Headers
  readonly properties: MessageProperties
  readonly exchange: string
  readonly routingKey: string
  readonly redelivered: boolean
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** How long a test waits, after the deliveries it expects, for any it does not. */
const QUIET_MS = 150

const long = (value: number): HeaderValue => ({ '!': 'long', value })

function seen(delivery: Delivery): Seen {
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
const flagged = (s: Seen): string => (s.redelivered ? `${s.body}*` : s.body)

/**
 * Every RabbitMQ rule the in-memory transport says it shares with the broker, as assertions
 * that run unchanged on `InMemoryTransport` and on `AmqpTransport` against RabbitMQ: routing
 * on all four exchange types (headers `x-match` included) and to an alternate exchange, the
 * predeclared `amq.*` exchanges, mandatory returns, publishing to a missing exchange, queue
 * and per-message TTL with dead-lettering and `x-death`, dead-letter cycles, per-consumer
 * prefetch, where a requeued message goes back (classic and quorum), the redelivered flag,
 * `x-delivery-limit` on quorum queues, and which declarations the broker refuses. Every queue
 * and exchange name is fresh, so one broker (or virtual host) serves a whole run.
 */
export function transportParity(name: string, target: ParityTarget): void {
  describe(`RabbitMQ's rules on ${name}`, () => {
    let t: Transport
    let connected: Transport | undefined
    const open: TransportSubscription[] = []

    beforeEach(async () => {
      connected = undefined
      t = connected = await target.connect()
    })

    afterEach(async () => {
      for (const subscription of open.splice(0)) await subscription.close()
      // A failed connect has already said what went wrong; there is nothing to close.
      await connected?.close()
    })

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
      return t.publish({
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
      const subscription = await t.consume(queueName, { prefetch }, (d) => deliveries.push(d))
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
        async () => (await target.readyCount(t, queueName)) === count,
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

    describe('routing', () => {
      it('routes a direct exchange on the exact routing key', async () => {
        const x = fresh('direct')
        const [a, b] = [fresh('q'), fresh('q')]
        await t.declare([
          exchange(x, 'direct'),
          queue(a),
          queue(b),
          binding(a, x, 'orders.placed'),
          binding(b, x, 'orders'),
        ])
        await publish(x, 'orders.placed', 'one')
        await publish(x, 'orders', 'two')
        await expect(publish(x, 'orders.*', 'three')).rejects.toMatchObject({
          code: ErrorCodes.UNROUTABLE,
        })
        expect(await bodies(a, 1)).toEqual(['one'])
        expect(await bodies(b, 1)).toEqual(['two'])
      })

      it('routes a topic exchange on * (one word) and # (zero or more words)', async () => {
        const x = fresh('topic')
        const [star, hash, bare] = [fresh('q'), fresh('q'), fresh('q')]
        await t.declare([
          exchange(x, 'topic'),
          queue(star),
          queue(hash),
          queue(bare),
          binding(star, x, 'order.*'),
          binding(hash, x, 'order.#'),
          binding(bare, x, '#.eu'),
        ])
        for (const key of ['order', 'order.placed', 'order.placed.eu', 'eu'])
          await publish(x, key, key)
        await expect(publish(x, 'invoice.sent', 'x')).rejects.toMatchObject({
          code: ErrorCodes.UNROUTABLE,
        })
        expect(await bodies(star, 1)).toEqual(['order.placed'])
        expect(await bodies(hash, 3)).toEqual(['order', 'order.placed', 'order.placed.eu'])
        expect(await bodies(bare, 2)).toEqual(['order.placed.eu', 'eu'])
      })

      it('routes a fanout exchange to every bound queue whatever the routing key', async () => {
        const x = fresh('fanout')
        const [a, b] = [fresh('q'), fresh('q')]
        await t.declare([
          exchange(x, 'fanout'),
          queue(a),
          queue(b),
          binding(a, x, 'ignored'),
          binding(b, x, ''),
        ])
        await publish(x, 'anything', 'one')
        expect(await bodies(a, 1)).toEqual(['one'])
        expect(await bodies(b, 1)).toEqual(['one'])
      })

      it('routes a headers exchange on x-match all (the default), any, all-with-x and any-with-x, comparing values as RabbitMQ does', async () => {
        const x = fresh('headers')
        const bindings: Record<string, Record<string, HeaderValue>> = {
          all: { 'x-match': 'all', a: 1, b: 'x' },
          any: { 'x-match': 'any', a: 1, b: 'x' },
          byDefault: { a: long(1) },
          xKeysIgnored: { 'x-match': 'all', 'x-foo': 'bar' },
          xKeysIgnoredAny: { 'x-match': 'any', 'x-foo': 'bar' },
          allWithX: { 'x-match': 'all-with-x', 'x-foo': 'bar', a: 1 },
          anyWithX: { 'x-match': 'any-with-x', 'x-foo': 'bar', c: 3 },
          bytes: { s: Buffer.from('hi') },
          number: { n: 2 },
          presence: { v: null },
          boolean: { t: true },
          array: { arr: [1, 'a'] },
          timestamp: { ts: { '!': 'timestamp', value: 5 } },
          float: { f: { '!': 'float', value: 0.1 } },
          emptyAny: { 'x-match': 'any' },
        }
        const queues = Object.fromEntries(Object.keys(bindings).map((key) => [key, fresh(key)]))
        await t.declare([
          exchange(x, 'headers'),
          ...Object.values(queues).map((q) => queue(q)),
          ...Object.entries(bindings).map(([key, args]) =>
            binding(queues[key] as string, x, '', args),
          ),
        ])
        const messages: [string, Headers][] = [
          ['a1bx', { a: 1, b: 'x' }],
          ['a1', { a: 1 }],
          ['a1long', { a: long(1) }],
          ['a1int', { a: { '!': 'int', value: 1 } }],
          ['a1text', { a: '1' }],
          ['bBytes', { a: 2, b: Buffer.from('x') }],
          ['xfoo', { 'x-foo': 'bar' }],
          ['xfooA', { 'x-foo': 'bar', a: 1 }],
          ['c3', { 'x-foo': 'baz', c: 3 }],
          ['sText', { s: 'hi' }],
          ['n2double', { n: { '!': 'double', value: 2 } }],
          ['n2.5', { n: 2.5 }],
          ['vAny', { v: 'anything' }],
          ['vNull', { v: null }],
          ['t1', { t: 1 }],
          ['tTrue', { t: true }],
          ['arr', { arr: [1, 'a'] }],
          ['arrLong', { arr: [long(1), 'a'] }],
          ['ts5', { ts: 5 }],
          ['f0.1', { f: 0.1 }],
          ['f0.1float', { f: { '!': 'float', value: 0.1 } }],
          ['none', {}],
        ]
        for (const [body, headers] of messages) await publish(x, '', body, { headers })
        const expected: Record<string, string[]> = {
          all: ['a1bx'],
          any: ['a1bx', 'a1', 'a1long', 'a1int', 'bBytes', 'xfooA'],
          byDefault: ['a1bx', 'a1', 'a1long', 'a1int', 'xfooA'],
          xKeysIgnored: messages.map(([body]) => body),
          xKeysIgnoredAny: [],
          allWithX: ['xfooA'],
          anyWithX: ['xfoo', 'xfooA', 'c3'],
          bytes: ['sText'],
          number: ['n2double'],
          presence: ['vAny', 'vNull'],
          boolean: ['tTrue'],
          array: ['arr'],
          timestamp: ['ts5'],
          float: ['f0.1float'],
          emptyAny: [],
        }
        const routed: Record<string, string[]> = {}
        for (const [key, bodiesExpected] of Object.entries(expected)) {
          const q = queues[key] as string
          await readyIs(q, bodiesExpected.length)
          routed[key] = bodiesExpected.length === 0 ? [] : await bodies(q, bodiesExpected.length)
        }
        expect(routed).toEqual(expected)
      })

      it('keeps two bindings that differ only in their arguments, and re-binding the same arguments changes nothing', async () => {
        const x = fresh('headers')
        const q = fresh('q')
        await t.declare([
          exchange(x, 'headers'),
          queue(q),
          binding(q, x, 'k', { a: 1 }),
          binding(q, x, 'k', { a: 1 }),
          binding(q, x, 'k', { b: 1 }),
        ])
        await publish(x, 'k', 'a', { headers: { a: 1 } })
        await publish(x, 'k', 'b', { headers: { b: 1 } })
        await publish(x, 'k', 'both', { headers: { a: 1, b: 1 } })
        await expect(publish(x, 'k', 'c', { headers: { c: 1 } })).rejects.toMatchObject({
          code: ErrorCodes.UNROUTABLE,
        })
        expect(await bodies(q, 3)).toEqual(['a', 'b', 'both'])
      })

      it('delivers a message once to a queue that two bindings match', async () => {
        const x = fresh('direct')
        const q = fresh('q')
        await t.declare([
          exchange(x, 'direct'),
          queue(q),
          binding(q, x, 'k'),
          binding(q, x, 'k', { tag: 'other' }),
        ])
        await publish(x, 'k', 'once')
        expect(await bodies(q, 1)).toEqual(['once'])
      })

      it('routes what no binding takes to the alternate exchange, and returns it when that takes nothing either', async () => {
        const [x, ae, lost] = [fresh('direct'), fresh('fanout'), fresh('direct')]
        const [bound, spare] = [fresh('q'), fresh('q')]
        await t.declare([
          exchange(ae, 'fanout'),
          exchange(x, 'direct', { 'alternate-exchange': ae }),
          exchange(lost, 'direct', { 'alternate-exchange': fresh('missing') }),
          queue(bound),
          queue(spare),
          binding(bound, x, 'k'),
          binding(spare, ae, ''),
        ])
        await publish(x, 'k', 'bound')
        await publish(x, 'other', 'spare')
        await expect(publish(lost, 'k', 'x')).rejects.toMatchObject({ code: ErrorCodes.UNROUTABLE })
        expect(await bodies(bound, 1)).toEqual(['bound'])
        expect(await bodies(spare, 1)).toEqual(['spare'])
      })

      it('refuses a headers binding whose x-match is not all, any, all-with-x or any-with-x', async () => {
        const x = fresh('headers')
        const q = fresh('q')
        await t.declare([exchange(x, 'headers'), queue(q)])
        for (const xMatch of ['some', 1]) {
          const error = await refusal(t.declare([binding(q, x, '', { 'x-match': xMatch })]))
          expect(error.message).toMatch(/PRECONDITION_FAILED/)
        }
        await t.declare([binding(q, x, '', { 'x-match': 'any', a: 1 })])
      })

      it('has the predeclared amq.* exchanges, refuses new amq.* names and bindings to the default exchange', async () => {
        const q = fresh('q')
        await t.declare([
          queue(q),
          binding(q, 'amq.direct', q),
          binding(q, 'amq.topic', `${q}.#`),
          binding(q, 'amq.fanout', ''),
          binding(q, 'amq.headers', '', { k: q }),
          binding(q, 'amq.match', '', { k: q }),
          exchange('amq.direct', 'direct'),
        ])
        await publish('amq.direct', q, 'direct')
        await publish('amq.topic', `${q}.x`, 'topic')
        await publish('amq.headers', '', 'headers', { headers: { k: q } })
        expect(await bodies(q, 3)).toEqual(['direct', 'topic', 'headers'])
        const reserved = await refusal(t.declare([exchange(`amq.${fresh('mine')}`, 'direct')]))
        expect(reserved.message).toMatch(/ACCESS_REFUSED/)
        const defaultExchange = await refusal(t.declare([binding(q, '', 'k')]))
        expect(defaultExchange.message).toMatch(/ACCESS_REFUSED/)
      })
    })

    describe('publishing', () => {
      it('returns a mandatory message no queue takes, and drops a non-mandatory one silently', async () => {
        const missing = fresh('missing')
        await expect(publish('', missing, 'x')).rejects.toMatchObject({
          code: ErrorCodes.UNROUTABLE,
        })
        await publish('', missing, 'x', { mandatory: false })
        expect(await target.readyCount(t, missing)).toBeUndefined()
      })

      it('fails a publish to an exchange that does not exist, and the next publish goes through', async () => {
        const q = fresh('q')
        await t.declare([queue(q)])
        await expect(publish(fresh('no-such-exchange'), 'k', 'x')).rejects.toMatchObject({
          code: ErrorCodes.EXCHANGE_NOT_FOUND,
        })
        await publish('', q, 'after')
        expect(await bodies(q, 1)).toEqual(['after'])
      })
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
        const q = fresh('classic')
        await t.declare([queue(q)])
        for (let i = 1; i <= 5; i++) await publish('', q, `m${i}`)
        const { deliveries, subscription } = await subscribe(q, 3)
        await eventually(() => deliveries.length === 3)
        await subscription.cancel()
        for (const i of [1, 0, 2]) deliveries[i]?.nack(true)
        expect(await bodies(q, 5)).toEqual(['m1*', 'm2*', 'm3*', 'm4', 'm5'])
      })

      it('requeues to the head of a quorum queue with a delivery limit, in the order returned, counting each', async () => {
        const q = fresh('quorum')
        await t.declare([queue(q, 'quorum', { 'x-delivery-limit': 5 })])
        for (let i = 1; i <= 5; i++) await publish('', q, `m${i}`)
        const { deliveries, subscription } = await subscribe(q, 3)
        await eventually(() => deliveries.length === 3)
        await subscription.cancel()
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
        const q = fresh('quorum')
        await t.declare([queue(q, 'quorum', { 'x-delivery-limit': 5 })])
        for (let i = 1; i <= 5; i++) await publish('', q, `m${i}`)
        const { deliveries, subscription } = await subscribe(q, 3)
        await eventually(() => deliveries.length === 3)
        await subscription.cancel()
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

    describe('declarations', () => {
      it('refuses to re-declare a queue or an exchange with settings the broker compares (PRECONDITION_FAILED)', async () => {
        const [q, quorum, x] = [fresh('q'), fresh('quorum'), fresh('x')]
        await t.declare([
          queue(q, 'classic', { 'x-message-ttl': 100 }),
          queue(quorum, 'quorum', { 'x-delivery-limit': 3 }),
          exchange(x, 'direct', { 'alternate-exchange': 'ae' }),
        ])
        const conflicts: Declaration[] = [
          queue(q, 'classic', { 'x-message-ttl': 200 }),
          queue(q, 'classic', {}),
          queue(q, 'classic', { 'x-message-ttl': '100' }),
          queue(q, 'classic', { 'x-message-ttl': 100, 'x-dead-letter-exchange': 'dlx' }),
          queue(q, 'quorum', { 'x-message-ttl': 100 }),
          queue(q, 'classic', { 'x-message-ttl': 100 }, false),
          queue(quorum, 'quorum', { 'x-delivery-limit': 5 }),
          exchange(x, 'topic', { 'alternate-exchange': 'ae' }),
          exchange(x, 'direct', { 'alternate-exchange': 'other' }),
          exchange(x, 'direct', { 'alternate-exchange': 'ae' }, false),
        ]
        for (const conflict of conflicts) {
          const error = await refusal(t.declare([conflict]))
          expect(error.code, JSON.stringify(conflict)).toBe('ACEMQ_DECLARATION_FAILED')
          expect(error.message).toMatch(/PRECONDITION_FAILED/)
        }
        // The transport keeps working after a refusal.
        await publish('', q, 'still here')
        expect(await bodies(q, 1)).toEqual(['still here'])
      })

      it('accepts a re-declaration that differs only where the broker does not look', async () => {
        const [q, x] = [fresh('q'), fresh('x')]
        await t.declare([
          queue(q, 'classic', { 'x-message-ttl': 100, note: 'a' }),
          exchange(x, 'direct', { note: 'a' }),
        ])
        await expect(
          t.declare([
            queue(q, 'classic', { 'x-message-ttl': { '!': 'int', value: 100 }, note: 'b' }),
            queue(q, 'classic', { 'x-message-ttl': 100 }),
            exchange(x, 'direct', { note: 'b' }),
            exchange(x, 'direct'),
          ]),
        ).resolves.toBeUndefined()
      })

      it('refuses queue arguments the broker cannot accept', async () => {
        const invalid: Declaration[] = [
          queue(fresh('q'), 'classic', { 'x-message-ttl': -1 }),
          queue(fresh('q'), 'classic', { 'x-dead-letter-routing-key': 'k' }),
          queue(fresh('q'), 'quorum', {}, false),
        ]
        for (const declaration of invalid) {
          const error = await refusal(t.declare([declaration]))
          expect(error.message, JSON.stringify(declaration)).toMatch(/PRECONDITION_FAILED/)
        }
      })
    })
  })
}
