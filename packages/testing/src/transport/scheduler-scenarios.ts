import { describe, expect, it } from 'vitest'
import { AceMq, Topology, type Scheduler } from '@acemq/core'
import {
  SCHEDULE_DUE_QUEUE,
  SCHEDULE_RUNGS,
  readEnvelope,
  type ScheduleEventInfo,
} from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'
import { openScenario, type BrokerProbe, type ScenarioTarget } from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'

/**
 * The scheduler (docs/design.md §25), run against every transport: the family's ladder, a
 * short delay delivered with its envelope and without the schedule headers, the `delay`
 * shorthand, a destination that does not route (tried again in place, not lost), two control
 * consumers at once, health and telemetry, and bad input. The transport's broker (or virtual
 * host) must be this suite's alone: the ladder's names are the family's, not unique.
 */
export function schedulerScenarios(name: string, target: ScenarioTarget): void {
  describe(`the scheduler on ${name}`, () => {
    let mq: AceMq
    let probe: BrokerProbe
    let scheduler: Scheduler
    let queue: string
    const queues: string[] = []
    const events: ScheduleEventInfo[] = []

    eachScenario(
      target,
      queues,
      async (connection) => {
        ;({ mq, probe } = connection)
        mq.setInstrumentation({
          publishStarted: () => undefined,
          processStarted: () => undefined,
          scheduleEvent: (info) => events.push(info),
        })
        events.length = 0
        queue = uniqueName('acemq.later')
        queues.push(queue)
        await mq.applyTopology(Topology.define().queue(queue))
        scheduler = mq.scheduler()
      },
      { closing: () => scheduler.close() },
    )

    it('declares the family’s ladder: five rung queues and the control queue', async () => {
      await scheduler.in('2s', '', queue, { n: 1 })
      for (const rung of SCHEDULE_RUNGS) expect(await probe.count(rung.queue)).toBeDefined()
      expect(await probe.count(SCHEDULE_DUE_QUEUE)).toBeDefined()
      expect(await probe.count('acemq.schedule.1s')).toBe(1)
      // Delivered before the queue goes, so that no later scenario finds it due.
      await scheduler.startDelivering()
      await eventually(async () => (await probe.count(queue)) === 1, 10_000, 'delivered')
    })

    it('delivers a delayed message when due, with its envelope and content type and without the schedule headers', async () => {
      await scheduler.startDelivering()
      const sent = Date.now()
      await scheduler.in(
        1_500,
        '',
        queue,
        { order: 'o-1' },
        {
          id: 'later-1',
          correlation: 'checkout-9',
          headers: { 'x-tenant': 'acme' },
        },
      )
      expect(await probe.count(queue)).toBe(0)
      await eventually(async () => (await probe.count(queue)) === 1, 10_000, 'delivered')
      const arrived = Date.now()
      expect(arrived - sent).toBeGreaterThanOrEqual(1_500)
      const message = await probe.get(queue)
      const { envelope, headers } = readEnvelope(message?.headers, { routingKey: queue })
      expect(envelope.id).toBe('later-1')
      expect(envelope.correlation).toBe('checkout-9')
      expect(envelope.firstSeen).toBeGreaterThanOrEqual(sent - 5)
      expect(envelope.firstSeen).toBeLessThanOrEqual(sent + 100)
      expect(headers['x-tenant']).toBe('acme')
      expect(
        Object.keys(message?.headers ?? {}).filter((k) => k.startsWith('x-schedule-')),
      ).toEqual([])
      expect(Object.keys(message?.headers ?? {})).not.toContain('x-death')
      expect(message?.contentType).toBe('application/json')
      expect(Buffer.from(message?.body ?? []).toString()).toBe('{"order":"o-1"}')
      expect(scheduler.delivered).toBe(1)
      expect(events.map((e) => e.outcome)).toEqual(['scheduled', 'delivered'])
      const { reports } = await mq.health()
      expect(reports.find((r) => r.name === 'scheduler')).toMatchObject({
        status: 'UP',
        details: { scheduled: '1', delivered: '1', retrying: '0' },
      })
    })

    it('takes a publisher’s send(payload, { delay }) onto the ladder', async () => {
      await scheduler.startDelivering()
      await mq
        .publisher<string>('', queue, { contentType: 'text/plain' })
        .send('hello', { delay: '1s' })
      expect(await probe.count(queue)).toBe(0)
      await eventually(async () => (await probe.count(queue)) === 1, 10_000, 'delivered')
      const message = await probe.get(queue)
      expect(message?.contentType).toBe('text/plain')
      expect(Buffer.from(message?.body ?? []).toString()).toBe('hello')
    })

    it('tries a due message whose destination does not route again in place every 5 s, and delivers it once it routes', async () => {
      const later = uniqueName('acemq.later.missing')
      queues.push(later)
      await scheduler.startDelivering()
      await scheduler.in(0, '', later, { n: 1 })
      await eventually(() => scheduler.retrying === 1, 5_000, 'retrying')
      const { reports } = await mq.health()
      const report = reports.find((r) => r.name === 'scheduler')
      expect(report?.status).toBe('DEGRADED')
      expect(report?.details['lastFailure']).toContain(later)
      await mq.applyTopology(Topology.define().queue(later))
      await eventually(async () => (await probe.count(later)) === 1, 12_000, 'delivered')
      expect(scheduler.failures).toBeGreaterThanOrEqual(1)
      expect(scheduler.retrying).toBe(0)
      expect(events.some((e) => e.outcome === 'failed')).toBe(true)
    }, 20_000)

    it('delivers each message once with two control consumers on two connections', async () => {
      const other = await openScenario(target)
      try {
        await scheduler.startDelivering({ prefetch: 5 })
        await other.mq.scheduler().startDelivering({ prefetch: 5 })
        for (let n = 0; n < 20; n++)
          await scheduler.in(n % 2 === 0 ? 0 : 1_200, '', queue, { n }, { id: `m-${n}` })
        await eventually(async () => (await probe.count(queue)) === 20, 10_000, 'all 20 delivered')
        await new Promise((resolve) => setTimeout(resolve, 300))
        expect(await probe.count(queue)).toBe(20)
        expect(scheduler.delivered + other.mq.scheduler().delivered).toBe(20)
      } finally {
        await other.mq.close({ drainTimeout: 0 })
        await other.probe.close()
      }
    }, 20_000)

    it('refuses bad input naming the argument', async () => {
      await expect(scheduler.in(-1, '', queue, 1)).rejects.toThrow(/in\(delay\)/)
      await expect(scheduler.in(Number.NaN, '', queue, 1)).rejects.toThrow(/in\(delay\).*NaN/)
      await expect(scheduler.in('10 parsecs' as '10s', '', queue, 1)).rejects.toThrow(/in\(delay\)/)
      await expect(scheduler.at(new Date(Date.now() - 60_000), '', queue, 1)).rejects.toThrow(
        /at\(date\) is in the past/,
      )
      await expect(scheduler.at(new Date('nonsense'), '', queue, 1)).rejects.toThrow(
        /at\(date\) must be a valid Date/,
      )
      await expect(scheduler.in('1s', '', queue, 10n)).rejects.toThrow(
        /in\(payload\): the application\/json codec refused it/,
      )
      await expect(scheduler.in('1s', 7 as unknown as string, queue, 1)).rejects.toThrow(
        /in\(exchange\)/,
      )
      await expect(scheduler.startDelivering({ prefetch: 0 })).rejects.toThrow(
        /startDelivering\(options\.prefetch\) must be a whole number from 1 to 1000; got 0/,
      )
      await expect(mq.publisher('', queue).send(1, { delay: -5 })).rejects.toThrow(
        /send\(options\.delay\)/,
      )
    })
  })
}
