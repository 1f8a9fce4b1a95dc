import { afterAll, describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { SCHEDULE_RUNGS } from '@acemq/core/spi'
import { AmqpTransport } from '@acemq/transport-amqp'
import { amqpScenarioTarget } from '../../../test-support/amqp-target.js'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { eventually, requireRabbit, schedulerScenarios, uniqueName } from '@acemq/testing'

const hasRabbit = await requireRabbit()
// The ladder's names are the family's, not unique: this file gets a virtual host of its own.
const vhost = hasRabbit ? await BrokerVhost.create('acemq-scheduler') : undefined

describe.runIf(hasRabbit)('the scheduler on RabbitMQ', () => {
  afterAll(async () => {
    await vhost?.delete()
  }, 60_000)

  schedulerScenarios(
    'AmqpTransport (RabbitMQ)',
    amqpScenarioTarget(vhost?.url ?? '', 'acemq-scheduler'),
  )

  it('declares each rung with exactly three arguments, x-message-ttl a 64-bit long', async () => {
    const mq = await AceMq.connect(new AmqpTransport(vhost?.url ?? ''))
    try {
      await mq.scheduler().in('1h', '', uniqueName('nowhere'), 1)
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
    for (const rung of SCHEDULE_RUNGS) {
      const listed = await vhost?.queue(rung.queue)
      expect(listed?.type).toBe('classic')
      expect([...(listed?.arguments ?? [])].sort()).toEqual([
        ['x-dead-letter-exchange', 'longstr', 'acemq.schedule'],
        ['x-dead-letter-routing-key', 'longstr', 'acemq.schedule.due'],
        ['x-message-ttl', 'long', rung.ttlMs],
      ])
    }
    expect((await vhost?.queue('acemq.schedule.due'))?.arguments).toEqual([])
  })

  it('delivers a message delayed 15 s within the documented precision (15 s to 15.5 s)', async () => {
    const mq = await AceMq.connect(new AmqpTransport(vhost?.url ?? ''))
    const queue = uniqueName('acemq.fifteen')
    try {
      await mq.applyTopology(Topology.define().queue(queue))
      let arrivedAt = 0
      await mq.consume(queue, (await import('@acemq/core')).ConsumerOptions.defaults(), () => {
        arrivedAt = Date.now()
      })
      const scheduler = mq.scheduler()
      await scheduler.startDelivering()
      const sentAt = Date.now()
      await scheduler.in('15s', '', queue, { n: 1 })
      await eventually(() => arrivedAt > 0, 30_000, 'the delayed message arrived')
      const lateness = arrivedAt - sentAt - 15_000
      console.log(`scheduler: a 15 s delay arrived ${lateness} ms late on RabbitMQ`)
      expect(lateness).toBeGreaterThanOrEqual(0)
      expect(lateness).toBeLessThan(500)
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
  }, 45_000)
})
