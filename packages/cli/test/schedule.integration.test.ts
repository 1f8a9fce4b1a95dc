import { afterAll, describe, expect, it } from 'vitest'
import { AceMq } from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { requireRabbit } from '@acemq/testing'
import { runCli } from './support/run-cli.js'

const hasRabbit = await requireRabbit()
// The ladder's names are the family's: a virtual host of this file's own.
const vhost = hasRabbit ? await BrokerVhost.create('acemq-cli-schedule') : undefined

describe.runIf(hasRabbit)('acemq schedule list (the built binary)', () => {
  afterAll(async () => {
    await vhost?.delete()
  }, 60_000)

  it('says the ladder is not declared on a broker where nothing was scheduled', async () => {
    const run = await runCli(['schedule', 'list', '--url', vhost?.url ?? ''])
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/the schedule ladder is not declared/)
  })

  it('shows how many messages wait on each rung, longest first, for people and as JSON', async () => {
    const mq = await AceMq.connect(new AmqpTransport(vhost?.url ?? ''))
    try {
      const scheduler = mq.scheduler()
      await scheduler.in('3h', '', 'later', 1)
      await scheduler.in('2h', '', 'later', 2)
      await scheduler.in('15m', '', 'later', 3)
    } finally {
      await mq.close({ drainTimeout: 0 })
    }
    const human = await runCli(['schedule', 'list', '--url', vhost?.url ?? ''])
    expect(human.code).toBe(0)
    const lines = human.stdout.trim().split('\n')
    expect(lines[0]).toMatch(/^QUEUE\s+WAIT\s+MESSAGES$/)
    expect(lines[1]).toMatch(/^acemq\.schedule\.1h\s+1h\s+2$/)
    expect(lines[2]).toMatch(/^acemq\.schedule\.10m\s+10m\s+1$/)
    expect(lines[6]).toMatch(/^acemq\.schedule\.due\s+due\s+0$/)
    expect(human.stdout).toContain('3 message(s) scheduled and not yet delivered')
    const json = await runCli(['schedule', 'list', '--json', '--url', vhost?.url ?? ''])
    const parsed = JSON.parse(json.stdout) as {
      waiting: number
      queues: { queue: string; messages: number }[]
    }
    expect(parsed.waiting).toBe(3)
    expect(parsed.queues.map((q) => q.queue)).toEqual([
      'acemq.schedule.1h',
      'acemq.schedule.10m',
      'acemq.schedule.1m',
      'acemq.schedule.10s',
      'acemq.schedule.1s',
      'acemq.schedule.due',
    ])
  })
})
