import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  AceMq,
  ConnectionBlockedError,
  ConsumerOptions,
  InMemoryTransport,
  PublishFailedError,
  Topology,
  UnroutableError,
  type Headers,
} from '../../src/index.js'
import {
  type Declaration,
  type Delivery,
  type OutgoingMessage,
  type SubscriptionStatus,
  type TransportEvent,
} from '../../src/spi.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function message(routingKey: string, exchange = ''): OutgoingMessage {
  return {
    exchange,
    routingKey,
    body: Buffer.from('{}'),
    headers: {},
    properties: {},
    persistent: true,
    mandatory: true,
  }
}

async function connected(
  options: ConstructorParameters<typeof InMemoryTransport>[0] = {},
): Promise<InMemoryTransport> {
  const transport = new InMemoryTransport(options)
  await transport.connect()
  return transport
}

function queue(
  name: string,
  type: 'classic' | 'quorum' = 'classic',
  args: Record<string, unknown> = {},
): Declaration {
  return { kind: 'queue', name, type, durable: true, arguments: args }
}

function withHeaders(routingKey: string, headers: Headers): OutgoingMessage {
  return { ...message(routingKey), headers }
}

const text = (d: Delivery | undefined): string => Buffer.from(d?.body ?? []).toString()

/** A subscription that records its deliveries and status reports. */
async function recording(
  t: InMemoryTransport,
  name: string,
  prefetch = 10,
): Promise<{
  deliveries: Delivery[]
  statuses: string[]
  subscription: Awaited<ReturnType<InMemoryTransport['consume']>>
}> {
  const deliveries: Delivery[] = []
  const statuses: string[] = []
  const subscription = await t.consume(
    name,
    {
      prefetch,
      onStatus: (status: SubscriptionStatus) =>
        statuses.push(
          status.type === 'channel-lost' ? `lost: ${status.error?.message ?? ''}` : status.type,
        ),
    },
    (d) => deliveries.push(d),
  )
  return { deliveries, statuses, subscription }
}

describe('InMemoryTransport', () => {
  it('dead-letters a message whose queue TTL runs out, as a rung queue does', async () => {
    const t = await connected()
    await t.declare(
      Topology.define()
        .exchange('back', 'direct')
        .queue('target', { type: 'classic' })
        .bind('target', 'back', 'target')
        .queue('wait', {
          type: 'classic',
          arguments: {
            'x-message-ttl': 50,
            'x-dead-letter-exchange': 'back',
            'x-dead-letter-routing-key': 'target',
          },
        })
        .plan(),
    )
    await t.publish(message('wait'))
    expect(t.messageCount('wait')).toBe(1)
    await sleep(120)
    expect(t.messageCount('wait')).toBe(0)
    expect(t.messageCount('target')).toBe(1)
    expect(t.get('target')?.headers['x-death']).toEqual([
      expect.objectContaining({ reason: 'expired', queue: 'wait' }),
    ])
  })

  it('hands a consumer no more than its prefetch', async () => {
    const t = await connected()
    await t.declare(Topology.define().queue('q').plan())
    for (let i = 0; i < 10; i++) await t.publish(message('q'))
    const deliveries: Delivery[] = []
    await t.consume('q', { prefetch: 3 }, (d) => deliveries.push(d))
    await sleep(20)
    expect(deliveries).toHaveLength(3)
    deliveries[0]?.ack()
    await sleep(20)
    expect(deliveries).toHaveLength(4)
  })

  it('requeues a nacked delivery as redelivered, and refuses to settle twice', async () => {
    const t = await connected()
    await t.declare(Topology.define().queue('q').plan())
    await t.publish(message('q'))
    const deliveries: Delivery[] = []
    await t.consume('q', { prefetch: 1 }, (d) => deliveries.push(d))
    await sleep(10)
    expect(deliveries[0]?.nack(true)).toBe(true)
    expect(deliveries[0]?.ack()).toBe(false)
    await sleep(10)
    expect(deliveries[1]?.redelivered).toBe(true)
  })

  it('routes topic patterns with * and #', async () => {
    const t = await connected()
    await t.declare(
      Topology.define()
        .exchange('orders', 'topic')
        .queue('star')
        .queue('hash')
        .bind('star', 'orders', 'order.*')
        .bind('hash', 'orders', 'order.#')
        .plan(),
    )
    await t.publish(message('order.placed', 'orders'))
    await t.publish(message('order.placed.eu', 'orders'))
    await expect(t.publish(message('invoice.sent', 'orders'))).rejects.toBeInstanceOf(
      UnroutableError,
    )
    expect(t.messageCount('star')).toBe(1)
    expect(t.messageCount('hash')).toBe(2)
  })

  it('refuses a re-declaration with other settings, and publishing to a missing exchange', async () => {
    const t = await connected()
    await t.declare(Topology.define().queue('q', { type: 'classic' }).plan())
    await t.declare(Topology.define().queue('q', { type: 'classic' }).plan())
    await expect(t.declare(Topology.define().queue('q').plan())).rejects.toThrow(
      /PRECONDITION_FAILED/,
    )
    await expect(t.publish(message('x', 'no-such-exchange'))).rejects.toBeInstanceOf(
      PublishFailedError,
    )
  })

  it('blocks and unblocks publishing, and a waiting publish goes through on unblock', async () => {
    const t = await connected()
    await t.declare(Topology.define().queue('q').plan())
    const events: string[] = []
    t.onEvent((e) => events.push(e.type))
    t.block('low on memory')
    await expect(t.publish(message('q'))).rejects.toBeInstanceOf(ConnectionBlockedError)
    const waiting = t.publish(message('q'), { whenBlocked: 'wait' })
    await sleep(10)
    expect(t.messageCount('q')).toBe(0)
    t.unblock()
    await waiting
    expect(t.messageCount('q')).toBe(1)
    expect(events).toEqual(['blocked', 'unblocked'])
  })

  it('keeps a consumer consuming after the connection is lost and comes back', async () => {
    const t = new InMemoryTransport()
    const mq = await AceMq.connect(t)
    await mq.applyTopology(Topology.define().queue('q'))
    const seen: number[] = []
    await mq.consume<{ n: number }>('q', ConsumerOptions.defaults(), (m) => {
      seen.push(m.payload.n)
    })
    await mq.publisher('', 'q').send({ n: 1 })
    while (seen.length < 1) await sleep(5)
    await t.simulateConnectionLoss(20)
    await mq.publisher('', 'q').send({ n: 2 })
    while (seen.length < 2) await sleep(5)
    expect(seen).toEqual([1, 2])
    await mq.close()
  })

  it('fails a publish at once while disconnected', async () => {
    const t = await connected()
    await t.declare(Topology.define().queue('q').plan())
    let reconnected = false
    const loss = t.simulateConnectionLoss(50).then(() => (reconnected = true))
    await expect(t.publish(message('q'))).rejects.toThrow(/disconnected/)
    // It failed while the connection was down, without waiting for it to come back.
    expect(reconnected).toBe(false)
    await loss
    await t.publish(message('q'))
  })
})

describe('InMemoryTransport deliveries', () => {
  it('hands over the headers as a client decodes them, and the wire headers with their integer widths', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    const wire = {
      'x-acemq-attempt': { '!': 'int', value: 2 },
      big: { '!': 'long', value: 5 },
      ratio: { '!': 'float', value: 0.5 },
      at: { '!': 'timestamp', value: 7 },
      nested: [{ '!': 'long', value: 1 }, { inner: { '!': 'int', value: 3 } }],
      text: 'x',
    }
    await t.publish(withHeaders('q', wire))
    const { deliveries } = await recording(t, 'q')
    await sleep(10)
    expect(deliveries[0]?.wireHeaders).toEqual(wire)
    expect(deliveries[0]?.headers).toEqual({
      'x-acemq-attempt': 2,
      big: 5,
      ratio: 0.5,
      at: { '!': 'timestamp', value: 7 },
      nested: [1, { inner: 3 }],
      text: 'x',
    })
  })

  it('adds x-delivery-count, a 64-bit long, to a quorum redelivery only', async () => {
    const t = await connected()
    await t.declare([queue('qq', 'quorum'), queue('classic')])
    await t.publish(message('qq'))
    await t.publish(message('classic'))
    const quorum = await recording(t, 'qq', 1)
    const classic = await recording(t, 'classic', 1)
    await sleep(10)
    quorum.deliveries[0]?.nack(true)
    classic.deliveries[0]?.nack(true)
    await sleep(10)
    expect(quorum.deliveries.map((d) => d.wireHeaders?.['x-delivery-count'])).toEqual([
      undefined,
      { '!': 'long', value: 1 },
    ])
    expect(quorum.deliveries[1]?.headers['x-delivery-count']).toBe(1)
    expect(classic.deliveries.map((d) => d.headers['x-delivery-count'])).toEqual([
      undefined,
      undefined,
    ])
  })

  it('is settleable until it is settled', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    await t.publish(message('q'))
    const { deliveries } = await recording(t, 'q')
    await sleep(10)
    const [delivery] = deliveries
    expect(delivery?.settleable).toBe(true)
    expect(delivery?.ack()).toBe(true)
    expect(delivery?.settleable).toBe(false)
    expect(delivery?.nack(true)).toBe(false)
  })

  it('gives a consumer that requeues at once a turn of the event loop between redeliveries', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    await t.publish(message('q'))
    let deliveries = 0
    let beforeNextTurn: number | undefined
    await t.consume('q', { prefetch: 1 }, (d) => {
      deliveries++
      if (deliveries === 1) setImmediate(() => (beforeNextTurn = deliveries))
      if (deliveries < 1_000) d.nack(true)
      else d.ack()
    })
    await vi.waitFor(() => expect(beforeNextTurn).toBeDefined())
    expect(beforeNextTurn).toBeLessThan(10)
  })
})

describe('InMemoryTransport quorum delivery limit', () => {
  it("gives a quorum queue declared without a limit RabbitMQ 4's 20 returns, then dead-letters it", async () => {
    const t = await connected()
    await t.declare(Topology.define().queueWithDeadLetter('orders').plan())
    await t.publish(message('orders'))
    let deliveries = 0
    await t.consume('orders', { prefetch: 1 }, (d) => {
      deliveries++
      d.nack(true)
    })
    await vi.waitFor(() => expect(t.messageCount('orders.dlq')).toBe(1))
    expect(deliveries).toBe(21)
    expect(t.get('orders.dlq')?.headers['x-first-death-reason']).toBe('delivery_limit')
  })

  it('has no limit when x-delivery-limit is negative, and sends a nacked message to the back then', async () => {
    const t = await connected()
    await t.declare([queue('q', 'quorum', { 'x-delivery-limit': -1 })])
    for (const body of ['m1', 'm2']) await t.publish({ ...message('q'), body: Buffer.from(body) })
    const seen: string[] = []
    await t.consume('q', { prefetch: 1 }, (d) => {
      seen.push(text(d))
      if (seen.length <= 50) d.nack(true)
      else d.ack()
    })
    await vi.waitFor(() => expect(seen).toHaveLength(52))
    // 26 deliveries of each, past the default limit of 20, alternating: each went to the back.
    expect(seen.slice(0, 4)).toEqual(['m1', 'm2', 'm1', 'm2'])
    expect(seen.filter((body) => body === 'm1')).toHaveLength(26)
    expect(t.messageCount('q')).toBe(0)
  })
})

describe('InMemoryTransport fault controls', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('closeChannel requeues the unsettled deliveries to the head in order, reports channel-lost, and consumes again a tick later', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    for (const body of ['m1', 'm2', 'm3']) {
      await t.publish({ ...message('q'), body: Buffer.from(body) })
    }
    const { deliveries, statuses } = await recording(t, 'q', 2)
    await sleep(10)
    expect(deliveries.map(text)).toEqual(['m1', 'm2'])
    deliveries[0]?.ack()
    await sleep(10)
    t.closeChannel('q', 'PRECONDITION_FAILED - unknown delivery tag 9')
    expect(statuses).toEqual([
      "lost: the in-memory broker closed the channel of the consumer on queue 'q': PRECONDITION_FAILED - unknown delivery tag 9",
    ])
    expect(deliveries[1]?.settleable).toBe(false)
    expect(deliveries[2]?.settleable).toBe(false)
    expect(deliveries[1]?.ack()).toBe(false)
    expect(t.peek('q').map((m) => [Buffer.from(m.body).toString(), m.redelivered])).toEqual([
      ['m2', true],
      ['m3', true],
    ])
    await sleep(10)
    expect(statuses.slice(1)).toEqual(['consuming'])
    expect(deliveries.slice(3).map((d) => [text(d), d.redelivered])).toEqual([
      ['m2', true],
      ['m3', true],
    ])
  })

  it('keeps a message whose queue TTL is longer than setTimeout can wait (2^31−1 ms) until it runs out', async () => {
    vi.useFakeTimers()
    const t = await connected()
    const thirtyDays = 30 * 86_400_000
    await t.declare([queue('slow-rung', 'classic', { 'x-message-ttl': thirtyDays })])
    await t.publish(message('slow-rung'))
    await vi.advanceTimersByTimeAsync(1_000)
    expect(t.messageCount('slow-rung')).toBe(1)
    await vi.advanceTimersByTimeAsync(29 * 86_400_000)
    expect(t.messageCount('slow-rung')).toBe(1)
    await vi.advanceTimersByTimeAsync(86_400_000)
    expect(t.messageCount('slow-rung')).toBe(0)
    await t.close()
  })

  it("closes a delivery's channel when it stays unacknowledged past the consumer timeout", async () => {
    vi.useFakeTimers()
    const t = await connected({ consumerTimeoutMs: 1_000 })
    await t.declare([queue('q'), queue('quick', 'classic', { 'x-consumer-timeout': 100 })])
    await t.publish(message('q'))
    await t.publish(message('quick'))
    const slow = await recording(t, 'q')
    const quick = await recording(t, 'quick')
    await vi.advanceTimersByTimeAsync(1)
    expect([slow.deliveries.length, quick.deliveries.length]).toEqual([1, 1])
    await vi.advanceTimersByTimeAsync(150)
    expect(quick.statuses).toEqual([
      expect.stringMatching(/delivery acknowledgement timed out \(timeout value used: 100 ms\)$/),
      'consuming',
    ])
    expect(quick.deliveries.map((d) => d.redelivered)).toEqual([false, true])
    expect(slow.statuses).toEqual([])
    slow.deliveries[0]?.ack()
    await vi.advanceTimersByTimeAsync(2_000)
    expect(slow.statuses).toEqual([])
    await t.close()
  })

  it('drops only the publishing side when asked: publishes fail, deliveries and acks go on, and the events still say so', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    await t.publish(message('q'))
    const events: TransportEvent['type'][] = []
    t.onEvent((e) => events.push(e.type))
    const { deliveries, statuses } = await recording(t, 'q')
    const loss = t.simulateConnectionLoss(50, 'publish')
    expect(t.state.open).toBe(false)
    await expect(t.publish(message('q'))).rejects.toBeInstanceOf(PublishFailedError)
    await sleep(10)
    expect(deliveries).toHaveLength(1)
    expect(deliveries[0]?.ack()).toBe(true)
    await t.declare([queue('other')])
    await loss
    expect(t.state.open).toBe(true)
    expect(events).toEqual(['disconnected', 'reconnected'])
    expect(statuses).toEqual([])
  })

  it('drops only the consuming side when asked: every channel is lost and comes back, publishes go on', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    await t.publish(message('q'))
    const events: TransportEvent['type'][] = []
    t.onEvent((e) => events.push(e.type))
    const { deliveries, statuses } = await recording(t, 'q')
    await sleep(10)
    const loss = t.simulateConnectionLoss(50, 'consume')
    expect(statuses).toEqual(['lost: simulated connection loss (consume)'])
    expect(deliveries[0]?.settleable).toBe(false)
    expect(t.messageCount('q')).toBe(1)
    await t.publish(message('q'))
    await expect(t.declare([queue('other')])).rejects.toThrow(/disconnected/)
    await sleep(10)
    expect(deliveries).toHaveLength(1)
    await loss
    await sleep(10)
    expect(events).toEqual(['disconnected', 'reconnected'])
    expect(statuses.slice(1)).toEqual(['consuming'])
    expect(deliveries.slice(1).map((d) => d.redelivered)).toEqual([true, false])
  })

  it('reports the connection back only when overlapping outages have both ended', async () => {
    vi.useFakeTimers()
    const t = await connected()
    const events: TransportEvent['type'][] = []
    t.onEvent((e) => events.push(e.type))
    const publishLoss = t.simulateConnectionLoss(100, 'publish')
    const consumeLoss = t.simulateConnectionLoss(300, 'consume')
    await vi.advanceTimersByTimeAsync(150)
    await publishLoss
    expect(t.state.open).toBe(false)
    await t.publish(message('nowhere', '')).catch(() => undefined)
    await vi.advanceTimersByTimeAsync(200)
    await consumeLoss
    expect(t.state.open).toBe(true)
    expect(events).toEqual(['disconnected', 'reconnected'])
    await t.close()
  })

  it('fails a publish waiting for an unblock when the publishing side drops', async () => {
    const t = await connected()
    await t.declare([queue('q')])
    t.block()
    const waiting = t.publish(message('q'), { whenBlocked: 'wait' })
    const loss = t.simulateConnectionLoss(20, 'publish')
    await expect(waiting).rejects.toBeInstanceOf(PublishFailedError)
    expect(t.state.blocked).toBe(false)
    await loss
  })

  it('leaves no timer running after close, whatever was pending', async () => {
    vi.useFakeTimers()
    const t = await connected({ consumerTimeoutMs: 60_000 })
    await t.declare([queue('q', 'classic', { 'x-message-ttl': 60_000 }), queue('held')])
    await t.publish(message('q'))
    await t.publish(message('held'))
    await recording(t, 'held')
    await vi.advanceTimersByTimeAsync(1)
    const loss = t.simulateConnectionLoss(60_000, 'publish')
    t.closeChannel('held')
    expect(vi.getTimerCount()).toBeGreaterThan(0)
    await t.close()
    await loss
    expect(vi.getTimerCount()).toBe(0)
  })
})
