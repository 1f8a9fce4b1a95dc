import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { eventually, requireRabbit, uniqueName } from '@acemq/testing'
import * as amqp from 'amqplib'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

// A requester's reply queue is declared again with every recovery (so that its `x-expires` never
// strikes a live requester), but only while the requester lives: a closed one's queue is left to
// expire, and a recovery must not bring it back.
describe.runIf(hasRabbit)('request/reply when RabbitMQ closes its connections', () => {
  let vhost: BrokerVhost
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-requester-recovery')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  it('declares a live requester’s reply queue again after a recovery, and never a closed one’s', async () => {
    await using mq = await AceMq.connect(
      new AmqpTransport(vhost.url, {
        connectionName: 'acemq-requester-recovery',
        recovery: { initialDelay: 100, maxDelay: 500 },
      }),
    )
    const queue = uniqueName('prices')
    await mq.applyTopology(Topology.define().queue(queue))
    await mq.respond<{ n: number }, { twice: number }>(queue, {}, (request) => ({
      twice: request.payload.n * 2,
    }))
    const live = mq.requester()
    const closed = mq.requester()
    expect(await live.request('', queue, { n: 1 })).toEqual({ twice: 2 })
    expect(await closed.request('', queue, { n: 2 })).toEqual({ twice: 4 })
    await closed.close()

    // Both queues gone from the broker (as x-expires would take them), then a recovery.
    const raw = await amqp.connect(vhost.url)
    try {
      const channel = await raw.createChannel()
      for (const name of [live.replyQueue, closed.replyQueue]) await channel.deleteQueue(name)
      await channel.close()
    } finally {
      await raw.close()
    }
    await vhost.closeAllConnections()
    await eventually(() => !mq.transport.state.open, 10_000, 'the connection lost')
    await eventually(() => mq.transport.state.open, 20_000, 'the connection recovered')

    const queues = await vhost.queueCounts()
    expect(queues.has(live.replyQueue)).toBe(true)
    expect(queues.has(closed.replyQueue)).toBe(false)
    expect(await live.request('', queue, { n: 3 }, { timeout: '10s' })).toEqual({ twice: 6 })
  }, 60_000)
})
