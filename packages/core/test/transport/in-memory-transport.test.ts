import { describe, expect, it } from 'vitest'
import {
  AceMq,
  ConnectionBlockedError,
  ConsumerOptions,
  InMemoryTransport,
  PublishFailedError,
  Topology,
  UnroutableError,
  type Delivery,
  type OutgoingMessage,
} from '../../src/index.js'

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

async function connected(): Promise<InMemoryTransport> {
  const transport = new InMemoryTransport()
  await transport.connect()
  return transport
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
    const loss = t.simulateConnectionLoss(50)
    await expect(t.publish(message('q'))).rejects.toThrow(/disconnected/)
    await loss
    await t.publish(message('q'))
  })
})
