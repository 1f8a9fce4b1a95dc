import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SubscriptionStatus } from '@acemq/core/spi'
import { startRabbitNode } from '../../../test-support/rabbitmq-node.js'
import type { RabbitNode } from '../../../test-support/rabbitmq-node.js'
import { requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { Harness, collector, eventually, text } from './support/harness.js'

const hasRabbit = await requireRabbit()

/**
 * RabbitMQ closes the channel of a consumer that holds a delivery longer than `consumer_timeout`
 * (PRECONDITION_FAILED, "delivery acknowledgement on channel 1 timed out"). On 3.10 that is a
 * node-wide setting, checked on every channel tick (`channel_tick_interval`, 60 s by default),
 * so this suite starts a node of its own with a 2 s timeout and a 500 ms tick: the main broker
 * keeps its 30 minutes. Measured: the channel closes about 2.5 s after the delivery.
 */
describe.runIf(hasRabbit)('AmqpTransport when the broker times out a consumer', () => {
  let node: RabbitNode | undefined
  let admin: AmqpAdmin | undefined
  const harness = new Harness()

  beforeAll(async () => {
    node = await startRabbitNode({
      prefix: 'acemq-consumer-timeout',
      config: { consumer_timeout: '2000' },
      rabbitAdvanced: { channel_tick_interval: '500' },
    })
    harness.url = node.url
    admin = await AmqpAdmin.open(node.url)
  }, 90_000)

  afterAll(async () => {
    await harness.closeAll()
    await admin?.close()
    await node?.stop()
  })

  it('reports channel-lost with the broker’s reason, the held delivery turns non-settleable, then consuming, even when the status listener throws', async () => {
    const transport = await harness.open({ recovery: { initialDelay: 100, maxDelay: 500 } })
    const q = uniqueName('timeout')
    await transport.declare([
      { kind: 'queue', name: q, type: 'classic', durable: true, arguments: {} },
    ])
    const statuses: { status: SubscriptionStatus; at: number; settleable: unknown[] }[] = []
    const { deliveries, onDelivery } = collector()
    await transport.consume(
      q,
      {
        prefetch: 1,
        onStatus: (status) => {
          statuses.push({
            status,
            at: performance.now(),
            settleable: deliveries.map((delivery) => delivery.settleable),
          })
          throw new Error('a status listener bug')
        },
      },
      onDelivery,
    )
    await admin?.sendRaw(q, Buffer.from('held too long'))
    await eventually(() => deliveries.length === 1)
    const received = performance.now()
    const held = deliveries[0]
    expect(held?.settleable).toBe(true)

    await eventually(() => statuses.length >= 1, 15_000, 'channel-lost')
    const [lost] = statuses
    expect(lost?.status.type).toBe('channel-lost')
    const error = lost?.status.type === 'channel-lost' ? lost.status.error : undefined
    expect(error?.message).toMatch(/PRECONDITION_FAILED.*timed out/)
    expect(lost?.settleable).toEqual([false])
    expect(held?.settleable).toBe(false)
    expect(held?.ack()).toBe(false)
    console.info(
      `consumer_timeout 2 s, tick 500 ms: channel-lost ${((lost?.at ?? 0) - received).toFixed(0)} ms after the delivery`,
    )

    await eventually(() => statuses.length >= 2, 10_000, 'consuming')
    expect(statuses.map((entry) => entry.status.type)).toEqual(['channel-lost', 'consuming'])
    expect(harness.warnings.join('\n')).toMatch(/a status listener bug/)
    // The message came back and is delivered on the new channel, where it can be settled.
    await eventually(() => deliveries.length === 2)
    const again = deliveries[1]
    expect(again && text(again)).toBe('held too long')
    expect(again?.redelivered).toBe(true)
    expect(again?.settleable).toBe(true)
    expect(again?.ack()).toBe(true)
    await eventually(async () => (await admin?.count(q)) === 0)
  })
})
