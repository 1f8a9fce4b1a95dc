import { afterEach, describe, expect, it } from 'vitest'
import { AceMq, InMemoryTransport, Topology } from '../../src/index.js'
import { SCHEDULE_RUNGS, rungFor, scheduleDeclarations } from '../../src/spi.js'
import { START, closeOnFakeClock, run, useFakeClock } from '../consumer/fake-clock.js'

const DAY = 86_400_000

describe('the scheduler under a fake clock', () => {
  let mq: AceMq | undefined

  afterEach(async () => {
    if (mq !== undefined) await closeOnFakeClock(mq)
    mq = undefined
  })

  it('delivers a message delayed 90 days on the in-memory transport, not a second early', async () => {
    useFakeClock()
    const transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queue('renewals'))
    const scheduler = mq.scheduler()
    await scheduler.startDelivering()
    await scheduler.in('90d', '', 'renewals', { account: 'a-7' }, { id: 'renew-a-7' })
    // The ladder: 1 h hops, no queue per delay.
    expect(transport.messageCount('acemq.schedule.1h')).toBe(1)
    await run(90 * DAY - 1_000)
    expect(transport.messageCount('renewals')).toBe(0)
    await run(1_000)
    expect(transport.messageCount('renewals')).toBe(1)
    expect(transport.peek('renewals')[0]?.headers['x-acemq-id']).toBe('renew-a-7')
    expect(scheduler.delivered).toBe(1)
    expect(Date.now() - START).toBe(90 * DAY)
  }, 60_000)

  it('tries a due message whose destination does not route again every 5 s, in place, until it routes', async () => {
    useFakeClock()
    const transport = new InMemoryTransport()
    mq = await AceMq.connect(transport, { onError: () => undefined })
    const scheduler = mq.scheduler()
    await scheduler.startDelivering()
    await scheduler.in(0, '', 'invoices', { n: 1 })
    await run(0)
    expect(scheduler.failures).toBe(1)
    await run(4_999)
    expect(scheduler.failures).toBe(1)
    await run(1)
    expect(scheduler.failures).toBe(2)
    // Held by the control consumer meanwhile: not back in the queue, not dead-lettered.
    expect(transport.unackedCount('acemq.schedule.due')).toBe(1)
    expect(transport.messageCount('acemq.schedule.due.dlq')).toBe(0)
    await mq.applyTopology(Topology.define().queue('invoices'))
    await run(5_000)
    expect(transport.messageCount('invoices')).toBe(1)
    expect(scheduler.failures).toBe(2)
    expect(scheduler.retrying).toBe(0)
  })

  it('delivers at(date) at that instant, within the smallest rung’s hop', async () => {
    useFakeClock()
    const transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queue('reminders'))
    const scheduler = mq.scheduler()
    await scheduler.startDelivering()
    await scheduler.at(new Date(START + 3_723_456), '', 'reminders', 'ping')
    await run(3_723_455)
    expect(transport.messageCount('reminders')).toBe(0)
    await run(1)
    expect(transport.messageCount('reminders')).toBe(1)
  })
})

describe('the schedule ladder', () => {
  it('picks the longest rung that does not overshoot, none under a second', () => {
    expect(rungFor(90 * DAY)?.queue).toBe('acemq.schedule.1h')
    expect(rungFor(3_599_999)?.queue).toBe('acemq.schedule.10m')
    expect(rungFor(60_000)?.queue).toBe('acemq.schedule.1m')
    expect(rungFor(15_000)?.queue).toBe('acemq.schedule.10s')
    expect(rungFor(1_000)?.queue).toBe('acemq.schedule.1s')
    expect(rungFor(999)).toBeUndefined()
  })

  it('is declared as the family does: three arguments per rung, the TTL typed 64-bit', () => {
    const declarations = scheduleDeclarations()
    for (const rung of SCHEDULE_RUNGS) {
      expect(declarations).toContainEqual({
        kind: 'queue',
        name: rung.queue,
        type: 'classic',
        durable: true,
        arguments: {
          'x-message-ttl': { '!': 'long', value: rung.ttlMs },
          'x-dead-letter-exchange': 'acemq.schedule',
          'x-dead-letter-routing-key': 'acemq.schedule.due',
        },
      })
    }
    expect(SCHEDULE_RUNGS.map((r) => r.ttlMs)).toEqual([3_600_000, 600_000, 60_000, 10_000, 1_000])
  })
})
