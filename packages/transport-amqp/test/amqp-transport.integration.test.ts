import { spawn } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { inspect } from 'node:util'
import amqplib from 'amqplib'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import {
  AceMqError,
  ClosedError,
  ConfigurationError,
  PublishFailedError,
  UnroutableError,
} from '@acemq/core'
import type { Declaration, SubscriptionStatus } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import {
  LOCK_WAIT_TIMEOUT,
  RecordingProxy,
  fieldTag,
  holdBrokerFaultLock,
} from './support/broker.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { Harness, collector, eventually, message, outcome, text } from './support/harness.js'

const hasRabbit = await requireRabbit()

function queue(name: string, type: 'classic' | 'quorum' = 'classic', args = {}): Declaration {
  return { kind: 'queue', name, type, durable: true, arguments: args }
}

describe.runIf(hasRabbit)('AmqpTransport on RabbitMQ', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  let releaseLock: () => Promise<void>
  const harness = new Harness()
  let queues: string[] = []

  /** A queue name that is deleted after the test. */
  function fresh(prefix: string): string {
    const name = uniqueName(prefix)
    queues.push(name)
    return name
  }

  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-transport-test')
    harness.url = vhost.url
    admin = await AmqpAdmin.open(vhost.url)
  }, LOCK_WAIT_TIMEOUT)

  afterEach(async () => {
    await harness.closeAll()
    await admin.deleteQueues(...queues)
    queues = []
  })

  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
    await releaseLock?.()
  })

  describe('publishing', () => {
    it('resolves once confirmed; the message is on the queue, persistent, with its properties and typed headers', async () => {
      const transport = await harness.open()
      const q = fresh('publish.props')
      await transport.declare([queue(q)])
      const firstSeen = 2 ** 40 + 7
      await transport.publish(
        message(q, 'hello', {
          headers: {
            'x-acemq-attempt': { '!': 'int', value: 3 },
            'x-acemq-first-seen': { '!': 'long', value: firstSeen },
            traceparent: '00-abc-def-01',
          },
          properties: {
            contentType: 'application/json',
            messageId: 'm-1',
            correlationId: 'c-1',
            type: 'order.placed',
            appId: 'tests',
            timestamp: 1_700_000_000,
          },
        }),
      )
      expect(transport.unconfirmed).toBe(0)
      const got = await admin.get(q)
      expect(got?.body.toString()).toBe('hello')
      expect(got?.properties.deliveryMode).toBe(2)
      expect(got?.properties).toMatchObject({
        contentType: 'application/json',
        messageId: 'm-1',
        correlationId: 'c-1',
        type: 'order.placed',
        appId: 'tests',
        timestamp: 1_700_000_000,
      })
      expect(got?.headers).toEqual({
        'x-acemq-attempt': 3,
        'x-acemq-first-seen': firstSeen,
        traceparent: '00-abc-def-01',
      })
    })

    it('writes typed integer headers at their width: int as 32-bit (I), long as 64-bit (l)', async () => {
      const transport = await harness.open()
      const q = fresh('publish.width')
      await transport.declare([queue(q)])
      await transport.publish(
        message(q, 'typed', {
          headers: {
            'x-acemq-attempt': { '!': 'int', value: 1 },
            'x-acemq-first-seen': { '!': 'long', value: 5 },
            plain: 7,
          },
        }),
      )
      // amqplib decodes every integer width to a number, so read the broker's bytes instead.
      const proxy = await RecordingProxy.start()
      const raw = await amqplib.connect(proxy.urlFor(vhost.url))
      try {
        const channel = await raw.createChannel()
        const got = await channel.get(q, { noAck: true })
        expect(got && got.properties.headers?.['x-acemq-first-seen']).toBe(5)
        const bytes = proxy.received()
        expect(bytes.includes(fieldTag('x-acemq-attempt', 'I'))).toBe(true)
        expect(bytes.includes(fieldTag('x-acemq-first-seen', 'l'))).toBe(true)
        // An untyped small number is left to amqplib (a byte), proving the check can tell.
        expect(bytes.includes(fieldTag('plain', 'b'))).toBe(true)
      } finally {
        await raw.close()
        await proxy.close()
      }
    })

    it('rejects an unroutable mandatory publish with UnroutableError while 100 interleaved routable ones resolve', async () => {
      const transport = await harness.open()
      const q = fresh('publish.routable')
      await transport.declare([queue(q)])
      const missing = uniqueName('publish.nowhere')
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          outcome(transport.publish(message(i % 2 === 0 ? q : missing, `m${i}`))),
        ),
      )
      results.forEach((result, i) => {
        if (i % 2 === 0) expect(result, `publish ${i}`).toBe('ok')
        else {
          expect(result, `publish ${i}`).toBeInstanceOf(UnroutableError)
          expect((result as UnroutableError).replyText).toBe('NO_ROUTE')
          expect((result as UnroutableError).routingKey).toBe(missing)
        }
      })
      await admin.waitForCount(q, 50)
      expect(transport.unconfirmed).toBe(0)
    })

    it('matches returns by content when exchange and routing key are the same (headers exchange)', async () => {
      const transport = await harness.open()
      const q = fresh('publish.headers')
      const exchange = uniqueName('publish.headers.x')
      await transport.declare([
        { kind: 'exchange', name: exchange, type: 'headers', durable: true, arguments: {} },
        queue(q),
        {
          kind: 'binding',
          queue: q,
          exchange,
          routingKey: '',
          arguments: { 'x-match': 'all', route: 'yes' },
        },
      ])
      try {
        const results = await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            outcome(
              transport.publish({
                ...message('same-key', `h${i}`),
                exchange,
                headers: { route: i % 3 === 0 ? 'no' : 'yes' },
              }),
            ),
          ),
        )
        results.forEach((result, i) => {
          if (i % 3 === 0) expect(result, `publish ${i}`).toBeInstanceOf(UnroutableError)
          else expect(result, `publish ${i}`).toBe('ok')
        })
        await admin.waitForCount(q, 66)
      } finally {
        await admin.channel.deleteExchange(exchange).catch(() => undefined)
      }
    })

    it('resolves a non-mandatory unroutable publish (the broker drops it, as asked)', async () => {
      const transport = await harness.open()
      await expect(
        transport.publish(message(uniqueName('nowhere'), 'x', { mandatory: false })),
      ).resolves.toBeUndefined()
      expect(transport.unconfirmed).toBe(0)
    })

    it('rejects with PublishFailedError when the broker nacks (a full queue that rejects publishes)', async () => {
      const transport = await harness.open()
      const q = fresh('publish.full')
      await transport.declare([
        queue(q, 'classic', { 'x-max-length': 1, 'x-overflow': 'reject-publish' }),
      ])
      await transport.publish(message(q, 'first'))
      const second = await outcome(transport.publish(message(q, 'second')))
      expect(second).toBeInstanceOf(PublishFailedError)
      expect((second as Error).message).toMatch(/nack/)
      await transport.publish(message(q, 'fits again', { mandatory: false })).catch(() => undefined)
      expect(transport.unconfirmed).toBe(0)
    })

    it('keeps at most maxUnconfirmed publishes awaiting confirms; a waiting one can be aborted', async () => {
      const transport = await harness.open({ maxUnconfirmed: 3 })
      const q = fresh('publish.window')
      await transport.declare([queue(q)])
      const first = Array.from({ length: 3 }, (_, i) => transport.publish(message(q, `w${i}`)))
      expect(transport.unconfirmed).toBe(3)
      const controller = new AbortController()
      const waiting = outcome(
        transport.publish(message(q, 'aborted'), { signal: controller.signal }),
      )
      const queued = transport.publish(message(q, 'queued'))
      expect(transport.unconfirmed).toBe(3)
      controller.abort()
      const aborted = await waiting
      expect(aborted).toBeInstanceOf(Error)
      expect((aborted as Error).name).toBe('AbortError')
      await Promise.all([...first, queued])
      await admin.waitForCount(q, 4)
    })

    it('a publish to a missing exchange fails with ACEMQ_EXCHANGE_NOT_FOUND naming it, and the next one goes through', async () => {
      const transport = await harness.open()
      const q = fresh('publish.reopen')
      await transport.declare([queue(q)])
      const missing = uniqueName('no.such.exchange')
      const failed = await outcome(transport.publish({ ...message(q, 'lost'), exchange: missing }))
      expect(failed).toBeInstanceOf(PublishFailedError)
      expect((failed as AceMqError).code).toBe('ACEMQ_EXCHANGE_NOT_FOUND')
      expect((failed as Error).message).toContain(`exchange '${missing}'`)
      await transport.publish(message(q, 'after'))
      await admin.waitForCount(q, 1)
      expect(transport.state.open).toBe(true)
    })

    it('a publish to a missing exchange fails alone: 300 application and 100 engine-lane publishes in flight are all confirmed', async () => {
      const transport = await harness.open()
      const q = fresh('publish.alone')
      const moves = fresh('publish.alone.moves')
      await transport.declare([queue(q), queue(moves)])
      const missing = uniqueName('no.such.exchange')
      const application = Array.from({ length: 300 }, (_, i) =>
        outcome(transport.publish(message(q, `a${i}`))),
      )
      const engine = Array.from({ length: 100 }, (_, i) =>
        outcome(
          transport.publish(message(moves, `e${i}`), { lane: 'engine', whenBlocked: 'wait' }),
        ),
      )
      const bad = outcome(transport.publish({ ...message(q, 'bad'), exchange: missing }))
      const more = Array.from({ length: 20 }, (_, i) =>
        outcome(transport.publish(message(q, `after${i}`))),
      )
      const failed = await bad
      const others = await Promise.all([...application, ...engine, ...more])
      const rejected = others.filter((result) => result !== 'ok')
      console.info(`publishes rejected besides the bad one: ${rejected.length} of ${others.length}`)
      expect((failed as AceMqError).code).toBe('ACEMQ_EXCHANGE_NOT_FOUND')
      expect((failed as Error).message).toContain(missing)
      expect(rejected.map((error) => (error as Error).message)).toEqual([])
      await admin.waitForCount(q, 320)
      await admin.waitForCount(moves, 100)
    })

    it('an engine-lane publish is written at once while the application window is full', async () => {
      const transport = await harness.open({ maxUnconfirmed: 3 })
      const q = fresh('publish.lanes')
      await transport.declare([queue(q)])
      const full = Array.from({ length: 3 }, (_, i) => transport.publish(message(q, `w${i}`)))
      const waiting = transport.publish(message(q, 'waits for room'))
      expect(transport.unconfirmed).toBe(3)
      const engine = transport.publish(message(q, 'engine'), { lane: 'engine' })
      expect(transport.unconfirmed).toBe(4)
      await Promise.all([...full, waiting, engine])
      await admin.waitForCount(q, 5)
    })

    it('an exchange deleted after its first publish: the 404 closes the application lane only; engine-lane publishes in flight are confirmed, and the next publish to it fails with ACEMQ_EXCHANGE_NOT_FOUND', async () => {
      const transport = await harness.open()
      const q = fresh('publish.deleted.x')
      const exchange = uniqueName('publish.deleted.x')
      await transport.declare([
        { kind: 'exchange', name: exchange, type: 'fanout', durable: true, arguments: {} },
        queue(q),
        { kind: 'binding', queue: q, exchange, routingKey: '', arguments: {} },
      ])
      await transport.publish({ ...message(q, 'seen'), exchange })
      await admin.channel.deleteExchange(exchange)
      const engine = Array.from({ length: 100 }, (_, i) =>
        outcome(transport.publish(message(q, `e${i}`), { lane: 'engine' })),
      )
      const gone = await outcome(transport.publish({ ...message(q, 'gone'), exchange }))
      expect(gone).toBeInstanceOf(PublishFailedError)
      expect((gone as Error).message).toMatch(/NOT_FOUND/)
      expect((await Promise.all(engine)).filter((result) => result !== 'ok')).toEqual([])
      const again = await outcome(transport.publish({ ...message(q, 'again'), exchange }))
      expect((again as AceMqError).code).toBe('ACEMQ_EXCHANGE_NOT_FOUND')
      await transport.publish(message(q, 'application lane is back'))
      await admin.waitForCount(q, 102)
    })

    it('refuses bad input with a ConfigurationError naming the field', async () => {
      const transport = await harness.open()
      await expect(
        transport.publish({ ...message('q', 'x'), routingKey: 5 as unknown as string }),
      ).rejects.toThrow(ConfigurationError)
      await expect(
        transport.publish({ ...message('q', 'x'), body: 'text' as unknown as Uint8Array }),
      ).rejects.toThrow(/message\.body/)
      await expect(
        transport.publish(message('q', 'x'), { lane: 'fast' as 'engine' }),
      ).rejects.toThrow(/options\.lane/)
    })
  })

  describe('declaring', () => {
    const fixture = {
      exchanges: [
        { name: 'orders', type: 'topic' },
        { name: 'acemq.dlx', type: 'direct' },
        { name: 'acemq.retry', type: 'direct' },
      ],
    } as const

    /** The contract fixture's topology (orders.new, exponential(6, 10s, 5m)), names unchanged. */
    function fixtureTopology(): Declaration[] {
      const q = 'orders.new'
      queues.push(
        q,
        `${q}.dlq`,
        `${q}.parked`,
        `${q}.retry.40s`,
        `${q}.retry.80s`,
        `${q}.retry.160s`,
      )
      const rung = (delay: number, name: string): Declaration =>
        queue(`${q}.retry.${name}`, 'classic', {
          'x-message-ttl': delay,
          'x-dead-letter-exchange': 'acemq.retry',
          'x-dead-letter-routing-key': q,
        })
      return [
        ...fixture.exchanges.map((exchange): Declaration => ({
          kind: 'exchange',
          durable: true,
          arguments: {},
          ...exchange,
        })),
        queue(q, 'quorum', {
          'x-dead-letter-exchange': 'acemq.dlx',
          'x-dead-letter-routing-key': `${q}.dlq`,
        }),
        queue(`${q}.dlq`),
        queue(`${q}.parked`),
        rung(40_000, '40s'),
        rung(80_000, '80s'),
        rung(160_000, '160s'),
        {
          kind: 'binding',
          queue: `${q}.dlq`,
          exchange: 'acemq.dlx',
          routingKey: `${q}.dlq`,
          arguments: {},
        },
        {
          kind: 'binding',
          queue: `${q}.parked`,
          exchange: 'acemq.dlx',
          routingKey: `${q}.parked`,
          arguments: {},
        },
        { kind: 'binding', queue: q, exchange: 'orders', routingKey: 'order.*', arguments: {} },
        { kind: 'binding', queue: q, exchange: 'acemq.retry', routingKey: q, arguments: {} },
      ]
    }

    it('declares the quorum source queue with dead-letter arguments, classic queues without x-queue-type, rung TTLs as 64-bit longs', async () => {
      const transport = await harness.open()
      await transport.declare(fixtureTopology())
      const listed = new Map((await vhost.queues()).map((q) => [q.name, q]))
      expect(listed.get('orders.new')).toMatchObject({ type: 'quorum', durable: true })
      expect(listed.get('orders.new')?.arguments).toEqual(
        expect.arrayContaining([
          ['x-queue-type', 'longstr', 'quorum'],
          ['x-dead-letter-exchange', 'longstr', 'acemq.dlx'],
          ['x-dead-letter-routing-key', 'longstr', 'orders.new.dlq'],
        ]),
      )
      expect(listed.get('orders.new')?.arguments).toHaveLength(3)
      for (const name of ['orders.new.dlq', 'orders.new.parked']) {
        expect(listed.get(name)).toMatchObject({ type: 'classic', durable: true, arguments: [] })
      }
      for (const [name, ttl] of [
        ['orders.new.retry.40s', 40_000],
        ['orders.new.retry.80s', 80_000],
        ['orders.new.retry.160s', 160_000],
      ] as const) {
        const rung = listed.get(name)
        expect(rung).toMatchObject({ type: 'classic', durable: true })
        expect(rung?.arguments).toEqual(
          expect.arrayContaining([
            ['x-message-ttl', 'long', ttl],
            ['x-dead-letter-exchange', 'longstr', 'acemq.retry'],
            ['x-dead-letter-routing-key', 'longstr', 'orders.new'],
          ]),
        )
        expect(rung?.arguments.some(([key]) => key === 'x-queue-type')).toBe(false)
      }
      // The topic binding routes: a publish to `orders` with `order.created` lands in the queue.
      await transport.publish({ ...message('order.created', 'routed'), exchange: 'orders' })
      await admin.waitForCount('orders.new', 1)
    })

    it('re-declaring the same topology resolves, on the same connection and on another', async () => {
      const transport = await harness.open()
      await expect(transport.declare(fixtureTopology())).resolves.toBeUndefined()
      await expect(transport.declare(fixtureTopology())).resolves.toBeUndefined()
      const other = await harness.open()
      await expect(other.declare(fixtureTopology())).resolves.toBeUndefined()
    })

    it('a queue that exists with other arguments is refused with an error naming it, and the transport keeps working', async () => {
      const transport = await harness.open()
      const q = fresh('declare.mismatch')
      await transport.declare([queue(q, 'classic')])
      const refused = await outcome(transport.declare([queue(q, 'quorum')]))
      expect(refused).toBeInstanceOf(AceMqError)
      expect((refused as AceMqError).code).toBe('ACEMQ_DECLARATION_FAILED')
      expect((refused as Error).message).toContain(`queue '${q}'`)
      expect((refused as Error).message).toMatch(/PRECONDITION_FAILED/)
      expect((refused as Error).message).toMatch(/cannot change once it exists/)
      // Still works: declare, publish, consume.
      const other = fresh('declare.after')
      await transport.declare([queue(other)])
      await transport.publish(message(other, 'still fine'))
      const { deliveries, onDelivery } = collector()
      await transport.consume(other, { prefetch: 1 }, onDelivery)
      await eventually(() => deliveries.length === 1)
      expect(transport.state).toMatchObject({ open: true, closed: false })
    })

    it('refuses a malformed declaration before sending anything', async () => {
      const transport = await harness.open()
      await expect(
        transport.declare([
          { kind: 'queue', name: 'bad', type: 'stream' as 'classic', durable: true, arguments: {} },
        ]),
      ).rejects.toThrow(/declarations\[0\]\.type/)
      await expect(
        transport.declare([queue('bad', 'classic', { 'x-queue-type': 'quorum' })]),
      ).rejects.toThrow(ConfigurationError)
    })
  })

  describe('consuming', () => {
    it('honours prefetch per consumer: with prefetch 5 and no acks exactly 5 deliveries arrive', async () => {
      const transport = await harness.open()
      const q = fresh('consume.prefetch')
      await transport.declare([queue(q)])
      for (let i = 0; i < 20; i++) await admin.sendRaw(q, Buffer.from(`p${i}`))
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 5 }, onDelivery)
      await eventually(() => deliveries.length >= 5)
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(deliveries).toHaveLength(5)
      expect(await vhost.consumerPrefetch(q)).toEqual([5])
      deliveries.forEach((delivery) => expect(delivery.ack()).toBe(true))
      await eventually(() => deliveries.length === 10)
    })

    it('hands over body, headers, properties, exchange, routing key and redelivered, in order', async () => {
      const transport = await harness.open()
      const q = fresh('consume.shape')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('one'), {
        contentType: 'text/plain',
        messageId: 'id-1',
        headers: { 'x-acemq-attempt': 2, foreign: 'yes' },
      })
      await admin.sendRaw(q, Buffer.from('two'))
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 10 }, onDelivery)
      await eventually(() => deliveries.length === 2)
      const [first, second] = deliveries
      expect(first && text(first)).toBe('one')
      expect(first?.headers).toEqual({ 'x-acemq-attempt': 2, foreign: 'yes' })
      expect(first?.properties).toEqual({ contentType: 'text/plain', messageId: 'id-1' })
      expect(first).toMatchObject({ exchange: '', routingKey: q, redelivered: false })
      expect(second && text(second)).toBe('two')
      expect(second?.headers).toEqual({})
      expect(second?.properties).toEqual({})
    })

    it('ack and nack answer whether they were written; settling twice answers false', async () => {
      const transport = await harness.open()
      const q = fresh('consume.settle')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('a'))
      await admin.sendRaw(q, Buffer.from('b'))
      await admin.sendRaw(q, Buffer.from('c'))
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 10 }, onDelivery)
      await eventually(() => deliveries.length === 3)
      const [a, b, c] = deliveries
      expect(a?.ack()).toBe(true)
      expect(a?.ack()).toBe(false)
      expect(a?.nack(true)).toBe(false)
      expect(b?.nack(false)).toBe(true)
      expect(c?.nack(true)).toBe(true)
      expect(c?.nack(true)).toBe(false)
      // c went back to the queue and comes again, redelivered; b was dropped.
      await eventually(() => deliveries.length === 4)
      expect(deliveries[3] && text(deliveries[3])).toBe('c')
      expect(deliveries[3]?.redelivered).toBe(true)
      expect(deliveries[3]?.ack()).toBe(true)
      await eventually(async () => (await vhost.counts(q))?.unacked === 0)
      expect(await vhost.counts(q)).toEqual({ ready: 0, unacked: 0 })
    })

    it('an ack after the subscription closed answers false, does not throw, and the message comes back', async () => {
      const transport = await harness.open()
      const q = fresh('consume.late')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('late'))
      const { deliveries, onDelivery } = collector()
      const subscription = await transport.consume(q, { prefetch: 1 }, onDelivery)
      await eventually(() => deliveries.length === 1)
      await subscription.close()
      await subscription.close()
      expect(deliveries[0]?.ack()).toBe(false)
      await admin.waitForCount(q, 1)
      const again = collector()
      await transport.consume(q, { prefetch: 1 }, again.onDelivery)
      await eventually(() => again.deliveries.length === 1)
      expect(again.deliveries[0]?.redelivered).toBe(true)
    })

    it('a delivery is settleable until it is settled or its subscription is closed, and closing it ourselves reports no status', async () => {
      const transport = await harness.open()
      const q = fresh('consume.settleable')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('a'))
      await admin.sendRaw(q, Buffer.from('b'))
      const { deliveries, onDelivery } = collector()
      const statuses: SubscriptionStatus[] = []
      const subscription = await transport.consume(
        q,
        { prefetch: 5, onStatus: (status) => statuses.push(status) },
        onDelivery,
      )
      await eventually(() => deliveries.length === 2)
      const [a, b] = deliveries
      expect(a?.settleable).toBe(true)
      expect(b?.settleable).toBe(true)
      expect(a?.ack()).toBe(true)
      expect(a?.settleable).toBe(false)
      await subscription.cancel()
      expect(b?.settleable).toBe(true)
      await subscription.close()
      expect(b?.settleable).toBe(false)
      expect(b?.ack()).toBe(false)
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(statuses).toEqual([])
    })

    it('wireHeaders keep the wire type of every foreign header, so a republished copy carries the same widths', async () => {
      const transport = await harness.open()
      const q = fresh('consume.wire')
      const copies = fresh('consume.wire.copies')
      await transport.declare([queue(q), queue(copies)])
      const stamp = 1_700_000_000
      await admin.sendRaw(q, Buffer.from('typed'), {
        headers: {
          byte: { '!': 'byte', value: 5 },
          ubyte: { '!': 'unsignedbyte', value: 200 },
          short: { '!': 'short', value: 5 },
          ushort: { '!': 'unsignedshort', value: 5 },
          int: { '!': 'int', value: 5 },
          uint: { '!': 'unsignedint', value: 5 },
          long: { '!': 'long', value: 5 },
          bigLong: { '!': 'long', value: 2n ** 60n + 1n },
          float: { '!': 'float', value: 1.5 },
          double: { '!': 'double', value: 2 },
          stamp: { '!': 'timestamp', value: stamp },
          decimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
          nested: { inner: { '!': 'long', value: 7 }, label: 'x' },
          ints: [
            { '!': 'int', value: 1 },
            { '!': 'int', value: 2 },
          ],
          flag: true,
          text: 'hello',
          bytes: Buffer.from([1, 2, 3]),
          nothing: null,
        },
      })
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 1 }, onDelivery)
      await eventually(() => deliveries.length === 1)
      const delivery = deliveries[0]
      if (delivery === undefined) throw new Error('no delivery')
      // The application's view is unchanged: plain numbers, as amqplib reads them.
      expect(delivery.headers).toMatchObject({ byte: 5, long: 5, int: 5, float: 1.5 })
      // The engine copies from wireHeaders when the transport has them.
      await transport.publish({
        ...message(copies, 'copy'),
        headers: delivery.wireHeaders ?? delivery.headers,
      })
      delivery.ack()

      const proxy = await RecordingProxy.start()
      const raw = await amqplib.connect(proxy.urlFor(vhost.url))
      try {
        const channel = await raw.createChannel()
        const got = await channel.get(copies, { noAck: true })
        expect(got && got.content.toString()).toBe('copy')
        const bytes = proxy.received()
        const tags: [string, string][] = [
          ['byte', 'b'],
          ['ubyte', 'B'],
          ['short', 's'],
          ['ushort', 'u'],
          ['int', 'I'],
          ['uint', 'i'],
          ['long', 'l'],
          ['bigLong', 'l'],
          ['float', 'f'],
          ['double', 'd'],
          ['stamp', 'T'],
          ['decimal', 'D'],
          ['nested', 'F'],
          ['inner', 'l'],
          ['label', 'S'],
          ['ints', 'A'],
          ['flag', 't'],
          ['text', 'S'],
          ['bytes', 'x'],
          ['nothing', 'V'],
        ]
        for (const [key, tag] of tags) {
          expect(bytes.includes(fieldTag(key, tag)), `${key} as '${tag}'`).toBe(true)
        }
        const int32 = (n: number): Buffer => {
          const b = Buffer.alloc(4)
          b.writeInt32BE(n)
          return b
        }
        // The array's items keep their width too: 'I' 1, 'I' 2.
        const items = Buffer.concat([Buffer.from('I'), int32(1), Buffer.from('I'), int32(2)])
        expect(bytes.includes(Buffer.concat([fieldTag('ints', 'A'), int32(10), items]))).toBe(true)
        // Values survive exactly, a long beyond 2^53 included.
        const bigLong = Buffer.alloc(8)
        bigLong.writeBigInt64BE(2n ** 60n + 1n)
        expect(bytes.includes(Buffer.concat([fieldTag('bigLong', 'l'), bigLong]))).toBe(true)
        const decimal = Buffer.from([2, 0, 0, 0x30, 0x39])
        expect(bytes.includes(Buffer.concat([fieldTag('decimal', 'D'), decimal]))).toBe(true)
      } finally {
        await raw.close()
        await proxy.close()
      }
    })

    it('wireHeaders are kept for every delivery when frames arrive split across socket reads (2,000 messages of mixed sizes)', async () => {
      const transport = await harness.open()
      const q = fresh('consume.wire.many')
      await transport.declare([queue(q)])
      const count = 2_000
      for (let i = 0; i < count; i++) {
        // Header tables and bodies of many sizes, some bodies over one frame (128 KiB).
        const pad = 'p'.repeat((i * 37) % 3_000)
        const body = Buffer.alloc(i % 100 === 0 ? 300_000 : (i * 131) % 5_000, i % 256)
        admin.channel.sendToQueue(q, body, {
          ...(i % 2 === 0 && { contentType: 'application/octet-stream' }),
          headers: { n: { '!': 'long', value: i }, pad, small: { '!': 'int', value: 1 } },
        })
      }
      await admin.channel.waitForConfirms()
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 500 }, (delivery) => {
        onDelivery(delivery)
        delivery.ack()
      })
      await eventually(() => deliveries.length === count, 30_000)
      const wrong = deliveries.filter((delivery, i) => {
        const wire = delivery.wireHeaders
        return (
          JSON.stringify(wire?.['n']) !== JSON.stringify({ '!': 'long', value: i }) ||
          JSON.stringify(wire?.['small']) !== JSON.stringify({ '!': 'int', value: 1 }) ||
          wire?.['pad'] !== 'p'.repeat((i * 37) % 3_000)
        )
      })
      expect(wrong.length).toBe(0)
    })

    it('cancel stops new deliveries, and deliveries already handed over can still be settled', async () => {
      const transport = await harness.open()
      const q = fresh('consume.cancel')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('before'))
      const { deliveries, onDelivery } = collector()
      const subscription = await transport.consume(q, { prefetch: 1 }, onDelivery)
      await eventually(() => deliveries.length === 1)
      await subscription.cancel()
      await admin.sendRaw(q, Buffer.from('after'))
      expect(deliveries[0]?.ack()).toBe(true)
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(deliveries).toHaveLength(1)
      expect(await vhost.counts(q)).toEqual({ ready: 1, unacked: 0 })
    })

    it('when the broker cancels the consumer (queue deleted) it re-declares the queue and keeps receiving', async () => {
      const transport = await harness.open({ recovery: { initialDelay: 50, maxDelay: 500 } })
      const q = fresh('consume.deleted')
      await transport.declare([queue(q)])
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 5 }, onDelivery)
      await admin.deleteQueues(q)
      await eventually(async () => (await vhost.consumerPrefetch(q)).length === 1, 10_000)
      await admin.sendRaw(q, Buffer.from('after the deletion'))
      await eventually(() => deliveries.length === 1)
      expect(deliveries[0] && text(deliveries[0])).toBe('after the deletion')
      expect(harness.warnings.join('\n')).toMatch(/cancelled the consumer/)
    })

    it('subscribing to a missing queue rejects with ACEMQ_NOT_FOUND naming it', async () => {
      const transport = await harness.open()
      const missing = uniqueName('consume.missing')
      const failed = await outcome(transport.consume(missing, { prefetch: 1 }, () => undefined))
      expect(failed).toBeInstanceOf(AceMqError)
      expect((failed as AceMqError).code).toBe('ACEMQ_NOT_FOUND')
      expect((failed as Error).message).toContain(missing)
      expect(transport.state.open).toBe(true)
    })

    it('a delivery callback that throws puts the message back and does not break the consumer', async () => {
      const transport = await harness.open()
      const q = fresh('consume.throws')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('boom'))
      let calls = 0
      await transport.consume(q, { prefetch: 1 }, (delivery) => {
        calls += 1
        if (calls === 1) throw new Error('handler bug')
        delivery.ack()
      })
      await eventually(() => calls === 2)
      await eventually(async () => (await vhost.counts(q))?.unacked === 0)
      expect(harness.warnings.join('\n')).toMatch(/handler bug/)
    })
  })

  describe('connection and credentials', () => {
    it('uses two connections, named for their roles, with the heartbeat asked for', async () => {
      await harness.open({ connectionName: 'orders-service', heartbeat: '7s' })
      const ours = async (): Promise<{ name: string; heartbeat: number }[]> =>
        (await vhost.connections())
          .filter((connection) => connection.name.startsWith('orders-service'))
          .sort((a, b) => a.name.localeCompare(b.name))
      await eventually(async () => (await ours()).length >= 2)
      expect(await ours()).toEqual([
        { name: 'orders-service (consume)', heartbeat: 7 },
        { name: 'orders-service (publish)', heartbeat: 7 },
      ])
    })

    it('never shows the password in its description', () => {
      const fromUrl = new AmqpTransport('amqp://app:s3cret-pw@rabbit:5672/orders')
      expect(fromUrl.kind).toBe('amqp')
      expect(fromUrl.description).toBe('amqp://app:***@rabbit:5672/orders')
      const fromObject = new AmqpTransport({
        hostname: 'rabbit',
        username: 'app',
        password: 's3cret-pw',
        vhost: 'orders',
      })
      expect(fromObject.description).toBe('amqp://app:***@rabbit:5672/orders')
      expect(inspect(fromObject, { depth: 5 })).not.toContain('s3cret-pw')
    })

    function expectNoPassword(error: unknown, transport: AmqpTransport): void {
      expect(error).toBeInstanceOf(AceMqError)
      expect((error as AceMqError).code).toBe('ACEMQ_CONNECTION_FAILED')
      const shown = [
        String(error),
        (error as Error).message,
        (error as Error).stack ?? '',
        inspect(error, { depth: 10 }),
        JSON.stringify(error),
        transport.description,
      ].join('\n')
      expect(shown).not.toContain('s3cret-pw')
      expect((error as Error).message).toContain('***')
    }

    it('never shows a password holding ?, /, #, @ or % (raw or percent-encoded) in its description, errors or warnings', async () => {
      const broker = new URL(vhost.url)
      for (const password of [
        'pa?ss',
        'pa/ss',
        'pa#ss',
        'p@ss',
        'p%ss',
        '12?ss',
        '12/ss',
        '12#ss',
      ]) {
        for (const written of [password, encodeURIComponent(password)]) {
          for (const host of ['127.0.0.1:1', broker.host]) {
            const url = `amqp://guest:${written}@${host}${broker.pathname}`
            const warnings: string[] = []
            const shown: string[] = []
            try {
              const transport = new AmqpTransport(url, {
                connectTimeout: '2s',
                logger: { warn: (line) => warnings.push(line) },
              })
              shown.push(transport.description, inspect(transport, { depth: 5 }))
              const failed = await outcome(transport.connect())
              expect(failed, url).toBeInstanceOf(AceMqError)
              shown.push(inspect(failed, { depth: 10 }), JSON.stringify(failed))
            } catch (error) {
              expect(error, url).toBeInstanceOf(ConfigurationError)
              shown.push(inspect(error, { depth: 10 }))
            }
            const text = [...shown, ...warnings].join('\n')
            expect(text, url).not.toContain(password)
            expect(text, url).not.toContain(written)
            expect(text, url).toContain('guest:***@')
          }
        }
      }
    })

    it('a wrong password fails to connect with an error that never shows it', async () => {
      const url = new URL(vhost.url)
      url.password = 's3cret-pw'
      const wrong = new AmqpTransport(url.toString(), { logger: { warn: () => undefined } })
      const failed = await outcome(wrong.connect())
      expectNoPassword(failed, wrong)
      expect((failed as Error).message).toMatch(/ACCESS_REFUSED/)
      expect(wrong.state.closed).toBe(true)
      await wrong.close()
    })

    it('a bad port fails fast with an error that never shows the password, for URLs and objects', async () => {
      const fromUrl = new AmqpTransport('amqp://guest:s3cret-pw@127.0.0.1:1/', {
        connectTimeout: '2s',
      })
      const urlFailure = await outcome(fromUrl.connect())
      expectNoPassword(urlFailure, fromUrl)
      expect((urlFailure as Error).message).toMatch(/ECONNREFUSED/)
      const fromObject = new AmqpTransport(
        { hostname: '127.0.0.1', port: 1, username: 'guest', password: 's3cret-pw' },
        { connectTimeout: '2s' },
      )
      expectNoPassword(await outcome(fromObject.connect()), fromObject)
    })

    it('operations before connect and after close are refused clearly', async () => {
      const transport = harness.create()
      await expect(transport.publish(message('q', 'x'))).rejects.toThrow(/not connected yet/)
      await expect(transport.declare([queue('q')])).rejects.toThrow(/not connected yet/)
      await transport.connect()
      await transport.close()
      await expect(transport.publish(message('q', 'x'))).rejects.toThrow(PublishFailedError)
      await expect(transport.declare([queue('q')])).rejects.toThrow(ClosedError)
      await expect(transport.consume('q', { prefetch: 1 }, () => undefined)).rejects.toThrow(
        ClosedError,
      )
      await expect(transport.connect()).resolves.toBeUndefined()
    })
  })

  describe('closing', () => {
    it('is safe to call twice and emits closed once', async () => {
      const transport = await harness.open()
      const events: string[] = []
      transport.onEvent((event) => events.push(event.type))
      await Promise.all([transport.close(), transport.close()])
      await transport.close()
      expect(events).toEqual(['closed'])
      expect(transport.state).toEqual({
        open: false,
        closed: true,
        blocked: false,
        blockedReason: undefined,
      })
    })

    it('rejects 50 outstanding publishes promptly with PublishFailedError', async () => {
      const transport = await harness.open()
      const q = fresh('close.outstanding')
      await transport.declare([queue(q)])
      const outstanding = Array.from({ length: 50 }, (_, i) =>
        outcome(transport.publish(message(q, `o${i}`))),
      )
      expect(transport.unconfirmed).toBe(50)
      const started = performance.now()
      const closing = transport.close()
      const results = await Promise.all(outstanding)
      const elapsed = performance.now() - started
      await closing
      // Promptly: not after a confirm or a timeout. The margin holds on a loaded two-core machine.
      expect(elapsed).toBeLessThan(2_000)
      for (const result of results) expect(result).toBeInstanceOf(PublishFailedError)
      expect(transport.unconfirmed).toBe(0)
    })

    it('closes subscriptions: their unsettled deliveries go back to the queue', async () => {
      const transport = await harness.open()
      const q = fresh('close.requeue')
      await transport.declare([queue(q)])
      await admin.sendRaw(q, Buffer.from('held'))
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 1 }, onDelivery)
      await eventually(() => deliveries.length === 1)
      await transport.close()
      expect(deliveries[0]?.ack()).toBe(false)
      await admin.waitForCount(q, 1)
    })

    it('leaves nothing behind: a process that connects, consumes, publishes and closes exits by itself', async () => {
      const q = fresh('close.exit')
      await admin.channel.assertQueue(q, { durable: true })
      const here = path.dirname(fileURLToPath(import.meta.url))
      const child = spawn(
        process.execPath,
        [
          '--conditions=@acemq/source',
          '--import',
          'tsx',
          path.join(here, 'support', 'exit-check.ts'),
        ],
        { env: { ...process.env, EXIT_CHECK_URL: vhost.url, EXIT_CHECK_QUEUE: q }, stdio: 'pipe' },
      )
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL')
          resolve(null)
        }, 15_000)
        child.on('exit', (exitCode) => {
          clearTimeout(timer)
          resolve(exitCode)
        })
      })
      expect(code, output).toBe(0)
      expect(output).toContain('received 1')
      expect(output).toContain('closed')
    })
  })
})
