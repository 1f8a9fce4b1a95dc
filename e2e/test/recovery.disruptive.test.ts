import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConsumerOptions, RetryPolicy, Topology, type AceMq } from '@acemq/core'
import { connect } from '@acemq/transport-amqp'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { closeAllConnections, withBrokerFault } from '../../test-support/broker-faults.js'
import { eventually, AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('a consumer after the broker drops every connection', () => {
  const queue = uniqueName('e2e.recovery')
  let mq: AceMq
  let admin: AmqpAdmin

  beforeAll(async () => {
    mq = await connect(AMQP_URL, {
      connectionName: 'e2e-recovery',
      recovery: { initialDelay: 100, maxDelay: 1_000 },
    })
    await mq.applyTopology(Topology.define().queueWithRetry(queue, RetryPolicy.fixed(3, 10)))
  })

  afterAll(async () => {
    await mq.close({ drainTimeout: 0 })
    admin = await AmqpAdmin.open()
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
  })

  it('reconnects and keeps consuming, without a restart, after rabbitmqctl close_all_connections (three times)', async () => {
    // The fault must really happen: each drop is seen as a disconnect, then a reconnect.
    const events: string[] = []
    const unsubscribe = mq.transport.onEvent((event) => events.push(event.type))
    const handled: number[] = []
    await mq.consume<{ n: number }>(
      queue,
      ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(3, 10)),
      (m) => {
        handled.push(m.payload.n)
      },
    )
    const publisher = mq.publisher<{ n: number }>('', queue)
    await publisher.send({ n: 0 })
    await eventually(() => handled.includes(0), 10_000, 'the first message')
    for (let round = 1; round <= 3; round++) {
      const before = events.length
      await withBrokerFault(() => closeAllConnections())
      await eventually(
        () => events.slice(before).includes('reconnected'),
        20_000,
        `a reconnect after drop ${round}`,
      )
      const since = events.slice(before)
      expect(since.indexOf('disconnected')).toBeGreaterThanOrEqual(0)
      expect(since.indexOf('disconnected')).toBeLessThan(since.lastIndexOf('reconnected'))
      await eventually(
        async () => (await mq.health()).status === 'UP',
        20_000,
        `recovery after drop ${round}`,
      )
      await publisher.send({ n: round })
      await eventually(
        () => handled.includes(round),
        10_000,
        `message ${round} after drop ${round}`,
      )
    }
    expect([...new Set(handled)].sort()).toEqual([0, 1, 2, 3])
    unsubscribe()
  }, 90_000)
})
