import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ConnectionBlockedError, PublishFailedError } from '@acemq/core'
import type { Declaration, SubscriptionStatus, TransportEvent } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { clearMemoryAlarm, raiseMemoryAlarm } from '../../../test-support/broker-faults.js'
import { requireRabbit, uniqueName } from '@acemq/testing'
import type { AmqpTransport } from '../src/index.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { LOCK_WAIT_TIMEOUT, closeConnectionNamed, holdBrokerFaultLock } from './support/broker.js'
import {
  Harness,
  collector,
  eventually,
  message,
  nextEvent,
  outcome,
  text,
} from './support/harness.js'

const hasRabbit = await requireRabbit()

function queue(name: string, type: 'classic' | 'quorum' = 'classic', args = {}): Declaration {
  return { kind: 'queue', name, type, durable: true, arguments: args }
}

function record(transport: AmqpTransport): TransportEvent[] {
  const events: TransportEvent[] = []
  transport.onEvent((event) => events.push(event))
  return events
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(hasRabbit)('AmqpTransport when the broker fails', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  let releaseLock: () => Promise<void>
  const harness = new Harness()
  let queues: string[] = []

  function fresh(prefix: string): string {
    const name = uniqueName(prefix)
    queues.push(name)
    return name
  }

  /**
   * Drops every connection on this suite's vhost (the transport's two, and the admin's, which
   * is reopened), as a broker restart or a network cut would. Other suites are not touched.
   */
  async function dropConnections(): Promise<void> {
    await vhost.closeAllConnections()
    await admin.close()
    admin = await AmqpAdmin.open(vhost.url)
  }

  beforeAll(async () => {
    // Alarms are broker-wide; the shared lock keeps every other fault test (and the suites
    // that hold it) out of the way while this file runs.
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
    await clearMemoryAlarm()
    await admin?.close()
    await vhost?.delete()
    await releaseLock?.()
  })

  describe('a lost connection', () => {
    it('reports disconnected then reconnected, refuses publishes fast meanwhile, and the subscription keeps receiving', async () => {
      const transport = await harness.open({ recovery: { initialDelay: 400, maxDelay: 1_000 } })
      const events = record(transport)
      const q = fresh('recover.consume')
      await transport.declare([queue(q)])
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 5 }, onDelivery)
      await admin.sendRaw(q, Buffer.from('before'))
      await eventually(() => deliveries.length === 1)

      const disconnected = nextEvent(transport, 'disconnected')
      const reconnected = nextEvent(transport, 'reconnected')
      await dropConnections()
      const lost = await disconnected
      expect(lost.error?.message).toMatch(/CONNECTION_FORCED/)
      expect(transport.state.open).toBe(false)
      await eventually(
        async () =>
          (await outcome(transport.publish(message(q, 'probe')))) instanceof PublishFailedError,
        1_000,
      )

      const latencies: number[] = []
      for (let i = 0; i < 20; i++) {
        const started = performance.now()
        const result = await outcome(transport.publish(message(q, `during ${i}`)))
        latencies.push(performance.now() - started)
        expect(result).toBeInstanceOf(PublishFailedError)
        expect((result as Error).message).toMatch(
          /is down and recovering: the message was not sent/,
        )
      }
      // Each failed at once: all twenty while the connection was still down (none waited for the
      // reconnect), each well under a second (a margin a loaded machine keeps).
      expect(transport.state.open).toBe(false)
      expect(Math.max(...latencies)).toBeLessThan(1_000)
      console.info(
        `publish latency while recovering: max ${Math.max(...latencies).toFixed(2)} ms over ${latencies.length}`,
      )

      await reconnected
      expect(transport.state).toMatchObject({ open: true, blocked: false })
      expect(events.map((event) => event.type)).toEqual(['disconnected', 'reconnected'])
      // A delivery from before the loss can no longer be settled: the broker redelivers it.
      expect(deliveries[0]?.ack()).toBe(false)
      await transport.publish(message(q, 'after'))
      await eventually(() => deliveries.some((delivery) => text(delivery) === 'after'))
      const again = deliveries.find(
        (delivery) => text(delivery) === 'before' && delivery.redelivered,
      )
      expect(again).toBeDefined()
      expect(again?.ack()).toBe(true)
    })

    it('replays every declaration, in order, on the new connection', async () => {
      const transport = await harness.open({ recovery: { initialDelay: 100, maxDelay: 1_000 } })
      const q = fresh('recover.declare')
      const exchange = uniqueName('recover.x')
      await transport.declare([
        { kind: 'exchange', name: exchange, type: 'topic', durable: true, arguments: {} },
        queue(q, 'quorum', { 'x-dead-letter-exchange': 'acemq.dlx' }),
        { kind: 'binding', queue: q, exchange, routingKey: 'a.#', arguments: {} },
      ])
      await admin.deleteQueues(q)
      expect(await vhost.queue(q)).toBeUndefined()
      const reconnected = nextEvent(transport, 'reconnected')
      await dropConnections()
      await reconnected
      expect(await vhost.queue(q)).toMatchObject({ type: 'quorum', durable: true })
      await transport.publish({ ...message('a.b', 'routed again'), exchange })
      await admin.waitForCount(q, 1)
      await admin.channel.deleteExchange(exchange).catch(() => undefined)
    })

    it('keeps every confirm permit: a full window across a reconnect, then 100 more publishes succeed', async () => {
      const transport = await harness.open({
        maxUnconfirmed: 10,
        recovery: { initialDelay: 200, maxDelay: 1_000 },
      })
      const q = fresh('recover.permits')
      await transport.declare([queue(q)])
      let flooding = true
      const tally = { ok: 0, lostInFlight: 0, refused: 0 }
      const flood = (async () => {
        while (flooding) {
          const results = await Promise.all(
            Array.from({ length: 25 }, () => outcome(transport.publish(message(q, 'flood')))),
          )
          for (const result of results) {
            if (result === 'ok') tally.ok += 1
            else if (/recovering/.test(result.message)) tally.refused += 1
            else tally.lostInFlight += 1
          }
          if (results.some((result) => result !== 'ok')) await sleep(5)
        }
      })()
      await eventually(() => tally.ok > 100)
      const reconnected = nextEvent(transport, 'reconnected')
      await dropConnections()
      await reconnected
      flooding = false
      await flood
      console.info(`flood across the reconnect: ${JSON.stringify(tally)}`)
      expect(tally.refused).toBeGreaterThan(0)
      expect(transport.unconfirmed).toBe(0)
      // Every permit is back: ten publishes are all written at once.
      const ten = Array.from({ length: 10 }, (_, i) => transport.publish(message(q, `t${i}`)))
      expect(transport.unconfirmed).toBe(10)
      await Promise.all(ten)
      const hundred = await Promise.all(
        Array.from({ length: 100 }, (_, i) => outcome(transport.publish(message(q, `h${i}`)))),
      )
      expect(hundred.every((result) => result === 'ok')).toBe(true)
    })

    it('close during recovery stops reconnecting', async () => {
      const transport = await harness.open({ recovery: { initialDelay: 1_000, maxDelay: 1_000 } })
      const events = record(transport)
      const disconnected = nextEvent(transport, 'disconnected')
      await dropConnections()
      await disconnected
      const started = performance.now()
      await transport.close()
      expect(performance.now() - started).toBeLessThan(500)
      await sleep(1_500)
      expect(
        (await vhost.connectionNames()).filter((name) => name.startsWith('acemq-transport-test')),
      ).toEqual([])
      expect(events.map((event) => event.type)).toEqual(['disconnected', 'closed'])
    })

    it('with recovery off, a lost connection closes the transport', async () => {
      const transport = await harness.open({ recovery: false })
      const events = record(transport)
      const closed = nextEvent(transport, 'closed')
      await dropConnections()
      await closed
      expect(events.map((event) => event.type)).toEqual(['disconnected', 'closed'])
      expect(transport.state).toMatchObject({ open: false, closed: true })
      await expect(transport.publish(message('q', 'x'))).rejects.toThrow(PublishFailedError)
    })
  })

  describe('one connection closed by the broker', () => {
    it('the publish connection: deliveries stay settleable, no channel-lost is reported, and publishing comes back', async () => {
      const transport = await harness.open({
        connectionName: 'acemq-one-conn',
        recovery: { initialDelay: 100, maxDelay: 500 },
      })
      const q = fresh('one.publish')
      await transport.declare([queue(q)])
      const statuses: SubscriptionStatus[] = []
      const { deliveries, onDelivery } = collector()
      await transport.consume(
        q,
        { prefetch: 5, onStatus: (status) => statuses.push(status) },
        onDelivery,
      )
      await admin.sendRaw(q, Buffer.from('held 1'))
      await admin.sendRaw(q, Buffer.from('held 2'))
      await eventually(() => deliveries.length === 2)

      const disconnected = nextEvent(transport, 'disconnected')
      const reconnected = nextEvent(transport, 'reconnected')
      await closeConnectionNamed(vhost.name, 'acemq-one-conn (publish)')
      await disconnected
      expect(deliveries.map((delivery) => delivery.settleable)).toEqual([true, true])
      await reconnected
      expect(deliveries.map((delivery) => delivery.settleable)).toEqual([true, true])
      expect(deliveries[0]?.ack()).toBe(true)
      expect(deliveries[1]?.ack()).toBe(true)
      await eventually(async () => (await vhost.counts(q))?.unacked === 0)
      await transport.publish(message(q, 'after'))
      await eventually(() => deliveries.length === 3)
      expect(deliveries[2]?.redelivered).toBe(false)
      expect(statuses).toEqual([])
    })

    it('the consume connection: every subscription reports channel-lost, its unsettled deliveries turn non-settleable, then consuming after recovery', async () => {
      const transport = await harness.open({
        connectionName: 'acemq-one-conn',
        recovery: { initialDelay: 100, maxDelay: 500 },
      })
      const queues = [fresh('one.consume.a'), fresh('one.consume.b')]
      await transport.declare(queues.map((name) => queue(name)))
      const subscriptions = queues.map((name) => ({
        name,
        statuses: [] as SubscriptionStatus[],
        settleableWhenLost: [] as (boolean | undefined)[],
        ...collector(),
      }))
      for (const subscription of subscriptions) {
        await transport.consume(
          subscription.name,
          {
            prefetch: 5,
            onStatus: (status) => {
              // What the engine relies on: by the time it hears channel-lost, nothing it holds
              // from that channel can be settled any more.
              if (status.type === 'channel-lost') {
                subscription.settleableWhenLost.push(
                  ...subscription.deliveries.map((delivery) => delivery.settleable),
                )
              }
              subscription.statuses.push(status)
            },
          },
          subscription.onDelivery,
        )
        await admin.sendRaw(subscription.name, Buffer.from('held'))
      }
      await eventually(() => subscriptions.every((s) => s.deliveries.length === 1))
      const reconnected = nextEvent(transport, 'reconnected')
      await closeConnectionNamed(vhost.name, 'acemq-one-conn (consume)')
      await eventually(() => subscriptions.every((s) => s.statuses.length >= 1))
      for (const subscription of subscriptions) {
        const [lost] = subscription.statuses
        expect(lost?.type).toBe('channel-lost')
        expect(lost?.type === 'channel-lost' && lost.error?.message).toMatch(/CONNECTION_FORCED/)
        expect(subscription.settleableWhenLost).toEqual([false])
        expect(subscription.deliveries[0]?.settleable).toBe(false)
        expect(subscription.deliveries[0]?.ack()).toBe(false)
      }
      await reconnected
      await eventually(() => subscriptions.every((s) => s.statuses.length === 2))
      for (const subscription of subscriptions) {
        expect(subscription.statuses.map((status) => status.type)).toEqual([
          'channel-lost',
          'consuming',
        ])
        // The message held when the channel was lost comes again, and this time can be settled.
        await eventually(() => subscription.deliveries.length === 2)
        const again = subscription.deliveries[1]
        expect(again && text(again)).toBe('held')
        expect(again?.redelivered).toBe(true)
        expect(again?.settleable).toBe(true)
        expect(again?.ack()).toBe(true)
      }
    })
  })

  describe('a memory alarm', () => {
    it('blocks publishing only: blocked event with the reason, ConnectionBlockedError, wait until unblocked; acks and declarations still flow', async () => {
      const transport = await harness.open()
      const events = record(transport)
      const q = fresh('blocked.publish')
      await transport.declare([queue(q)])
      const { deliveries, onDelivery } = collector()
      await transport.consume(q, { prefetch: 1 }, onDelivery)
      await admin.sendRaw(q, Buffer.from('held'))
      await eventually(() => deliveries.length === 1)

      let first: Promise<'ok' | Error> | undefined
      let waited: Promise<'ok' | Error> | undefined
      let unblocked: Promise<unknown> | undefined
      try {
        await raiseMemoryAlarm()
        // RabbitMQ tells a connection it is blocked only when it publishes during the alarm,
        // so this first publish is written, and waits for its confirm until the alarm clears.
        const blocked = nextEvent(transport, 'blocked')
        first = outcome(transport.publish(message(q, 'first')))
        expect((await blocked).reason).toBe('low on memory')
        expect(transport.state).toEqual({
          open: true,
          closed: false,
          blocked: true,
          blockedReason: 'low on memory',
        })

        const started = performance.now()
        const refused = await outcome(transport.publish(message(q, 'refused')))
        // Refused at once, not held until the alarm clears (below): a margin a loaded machine keeps.
        expect(performance.now() - started).toBeLessThan(1_000)
        expect(refused).toBeInstanceOf(ConnectionBlockedError)
        expect((refused as ConnectionBlockedError).reason).toBe('low on memory')

        // The consumer connection is not blocked: its ack and a declaration go through.
        expect(deliveries[0]?.ack()).toBe(true)
        await eventually(async () => (await vhost.counts(q))?.unacked === 0)
        await transport.declare([queue(fresh('blocked.declare'))])

        waited = outcome(transport.publish(message(q, 'waited'), { whenBlocked: 'wait' }))
        const controller = new AbortController()
        const abandoned = outcome(
          transport.publish(message(q, 'abandoned'), {
            whenBlocked: 'wait',
            signal: controller.signal,
          }),
        )
        controller.abort()
        expect((await abandoned) as Error).toHaveProperty('name', 'AbortError')
        await sleep(200)
        const pending = Symbol('pending')
        expect(await Promise.race([waited, sleep(0).then(() => pending)])).toBe(pending)
        unblocked = nextEvent(transport, 'unblocked')
      } finally {
        await clearMemoryAlarm()
      }
      await unblocked
      expect(await waited).toBe('ok')
      expect(await first).toBe('ok')
      expect(transport.state).toMatchObject({ blocked: false, blockedReason: undefined })
      expect(events.map((event) => event.type)).toEqual(['blocked', 'unblocked'])
      await eventually(() => deliveries.length === 2)
      expect(deliveries[1]?.ack()).toBe(true)
      await eventually(() => deliveries.length === 3)
      expect(deliveries.slice(1).map(text).sort()).toEqual(['first', 'waited'])
    })

    it('a blocked state does not survive a reconnect', async () => {
      const transport = await harness.open({ recovery: { initialDelay: 100, maxDelay: 1_000 } })
      const events = record(transport)
      const q = fresh('blocked.reconnect')
      await transport.declare([queue(q)])
      let stuck: Promise<'ok' | Error> | undefined
      try {
        await raiseMemoryAlarm()
        const blocked = nextEvent(transport, 'blocked')
        stuck = outcome(transport.publish(message(q, 'stuck')))
        await blocked
        const reconnected = nextEvent(transport, 'reconnected')
        await dropConnections()
        await reconnected
        expect(transport.state).toMatchObject({ open: true, blocked: false })
        expect(await stuck).toBeInstanceOf(PublishFailedError)
      } finally {
        await clearMemoryAlarm()
      }
      expect(events.map((event) => event.type)).toEqual([
        'blocked',
        'disconnected',
        'unblocked',
        'reconnected',
      ])
      await transport.publish(message(q, 'after the alarm'))
    })

    it('a publish waiting for an unblock is rejected when the transport closes', async () => {
      const transport = await harness.open()
      const q = fresh('blocked.close')
      await transport.declare([queue(q)])
      try {
        await raiseMemoryAlarm()
        const blocked = nextEvent(transport, 'blocked')
        const stuck = outcome(transport.publish(message(q, 'stuck')))
        await blocked
        const waiting = outcome(transport.publish(message(q, 'waiting'), { whenBlocked: 'wait' }))
        const started = performance.now()
        await transport.close()
        expect(performance.now() - started).toBeLessThan(500)
        expect(await waiting).toBeInstanceOf(PublishFailedError)
        expect(await stuck).toBeInstanceOf(PublishFailedError)
      } finally {
        await clearMemoryAlarm()
      }
    })
  })
})
