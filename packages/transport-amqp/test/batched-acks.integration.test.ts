import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions } from '@acemq/core'
import type { Declaration, Delivery } from '@acemq/core/spi'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { RecordingProxy, ackFrames } from './support/broker.js'
import { collector, eventually, text } from './support/harness.js'

const hasRabbit = await requireRabbit()

function queue(name: string): Declaration {
  return { kind: 'queue', name, type: 'classic', durable: true, arguments: {} }
}

/** One turn of the event loop and a little more: held acks are written by then. */
function turn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 50))
}

describe.runIf(hasRabbit)('acks batched into multiple acks on RabbitMQ', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  let proxy: RecordingProxy
  let transport: AmqpTransport | undefined
  let mq: AceMq | undefined
  let queues: string[] = []

  function fresh(prefix: string): string {
    const name = uniqueName(prefix)
    queues.push(name)
    return name
  }

  /** A transport whose consumer connection goes through the recording proxy. */
  async function open(): Promise<AmqpTransport> {
    transport = new AmqpTransport(proxy.urlFor(vhost.url), {
      connectionName: 'acemq-batched-acks-test',
      logger: { warn: () => undefined },
    })
    await transport.connect()
    return transport
  }

  async function fill(q: string, count: number): Promise<void> {
    for (let i = 1; i <= count; i++) {
      admin.channel.sendToQueue(q, Buffer.from(`m${i}`), { contentType: 'text/plain' })
    }
    await admin.channel.waitForConfirms()
  }

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-batched-acks-test')
    admin = await AmqpAdmin.open(vhost.url)
  })

  afterEach(async () => {
    await mq?.close({ drainTimeout: 0 })
    mq = undefined
    await transport?.close()
    transport = undefined
    await proxy?.close()
    await admin.deleteQueues(...queues)
    queues = []
  })

  afterAll(async () => {
    await admin?.close()
    await vhost?.delete()
  })

  it('acknowledges a run of settled deliveries with one multiple ack on the last of them', async () => {
    proxy = await RecordingProxy.start()
    const q = fresh('acks.run')
    await admin.channel.assertQueue(q, { durable: true })
    await fill(q, 50)
    const { deliveries, onDelivery } = collector()
    await (await open()).consume(q, { prefetch: 200 }, onDelivery)
    await eventually(() => deliveries.length === 50)
    for (const delivery of deliveries) expect(delivery.ack()).toBe(true)
    await eventually(async () => (await vhost.counts(q))?.unacked === 0)
    expect(ackFrames(proxy.sent())).toEqual([
      { channel: expect.any(Number), deliveryTag: 50, multiple: true },
    ])
  })

  it('never covers an earlier delivery still open: the acks behind it go one by one, and it comes back when the channel closes', async () => {
    proxy = await RecordingProxy.start()
    const q = fresh('acks.open-head')
    await admin.channel.assertQueue(q, { durable: true })
    await fill(q, 10)
    const { deliveries, onDelivery } = collector()
    const subscription = await (await open()).consume(q, { prefetch: 20 }, onDelivery)
    await eventually(() => deliveries.length === 10)
    const [first, ...rest] = deliveries as [Delivery, ...Delivery[]]
    for (const delivery of rest) expect(delivery.ack()).toBe(true)
    await eventually(async () => (await vhost.counts(q))?.unacked === 1)
    await turn()
    expect(await vhost.counts(q)).toEqual({ ready: 0, unacked: 1 })
    const acks = ackFrames(proxy.sent())
    expect(acks.map((ack) => ack.deliveryTag)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10])
    expect(acks.every((ack) => !ack.multiple)).toBe(true)

    await subscription.close()
    await admin.waitForCount(q, 1)
    const back = await admin.get(q)
    expect(back?.body.toString()).toBe(text(first))
  })

  it('writes the acks held before a nack first, then the nack, and a later run from after the gap', async () => {
    proxy = await RecordingProxy.start()
    const q = fresh('acks.nack')
    await admin.channel.assertQueue(q, { durable: true })
    await fill(q, 6)
    const { deliveries, onDelivery } = collector()
    await (await open()).consume(q, { prefetch: 20 }, onDelivery)
    await eventually(() => deliveries.length === 6)
    const [d1, d2, d3, d4, d5, d6] = deliveries as Delivery[]
    d1?.ack()
    d2?.ack()
    d3?.nack(false)
    d5?.ack()
    d4?.ack()
    d6?.ack()
    await eventually(async () => (await vhost.counts(q))?.unacked === 0)
    expect(
      ackFrames(proxy.sent()).map(({ deliveryTag, multiple }) => ({ deliveryTag, multiple })),
    ).toEqual([
      { deliveryTag: 2, multiple: true },
      { deliveryTag: 6, multiple: true },
    ])
  })

  it('through the engine: a slow first message is never acked while the rest finish, and comes back when the connection goes', async () => {
    proxy = await RecordingProxy.start()
    const q = fresh('acks.engine-slow')
    const amqp = await open()
    await amqp.declare([queue(q)])
    await fill(q, 30)
    mq = await AceMq.connect(amqp)
    const handled: string[] = []
    let releaseFirst: () => void = () => undefined
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve))
    await mq.consume(
      q,
      ConsumerOptions.defaults().withPrefetch(50).withConcurrency(10),
      async (message) => {
        const body = Buffer.from(message.body).toString()
        if (body === 'm1') await firstHeld
        handled.push(body)
      },
    )
    await eventually(() => handled.length === 29)
    await eventually(async () => (await vhost.counts(q))?.unacked === 1)
    await turn()
    expect(await vhost.counts(q)).toEqual({ ready: 0, unacked: 1 })
    // Nothing acknowledged the first delivery (tag 1): every ack was on a later tag, and a
    // multiple ack only ever on a run that did not reach back over it.
    const acks = ackFrames(proxy.sent())
    expect(acks.every((ack) => ack.deliveryTag > 1)).toBe(true)

    // The connection goes (the handler is still running): the broker puts m1 back.
    await amqp.close()
    await admin.waitForCount(q, 1)
    expect((await admin.get(q))?.body.toString()).toBe('m1')
    releaseFirst()
  })

  it('through the engine at concurrency 1 and prefetch 100: 2,000 messages take far fewer ack frames, every one acked', async () => {
    proxy = await RecordingProxy.start()
    const q = fresh('acks.engine-batch')
    const amqp = await open()
    await amqp.declare([queue(q)])
    await fill(q, 2_000)
    mq = await AceMq.connect(amqp)
    let handled = 0
    await mq.consume(q, ConsumerOptions.defaults().withPrefetch(100), () => {
      handled++
    })
    await eventually(() => handled === 2_000, 30_000)
    await eventually(async () => (await vhost.counts(q))?.unacked === 0)
    expect(await vhost.counts(q)).toEqual({ ready: 0, unacked: 0 })
    const acks = ackFrames(proxy.sent())
    // At most one frame per half window, and one per turn of the event loop.
    expect(acks.length).toBeLessThanOrEqual(2_000 / 10)
    expect(acks.at(-1)).toMatchObject({ deliveryTag: 2_000 })
    expect(await mq.drainConsumers(1_000)).toBe(true)
  })
})
