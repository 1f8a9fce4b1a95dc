import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { startExample } from '../../test-support/run-example.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the graceful-shutdown example', () => {
  let admin: AmqpAdmin
  let queue: string

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterEach(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
  })

  afterAll(async () => {
    await admin.close()
  })

  it(
    'on SIGTERM mid-job, finishes that job, hands the others back and exits 0',
    async () => {
      await withoutBrokerFaults(async () => {
        queue = uniqueName('examples.graceful-shutdown')
        const example = startExample('graceful-shutdown', {
          AMQP_URL,
          QUEUE: queue,
          JOB_MS: '1500',
          KEEP_RUNNING: '1',
        })
        await example.waitFor(/^job-1: started, takes 1500 ms$/)
        await example.waitFor(/^waiting for a signal/)
        const linesBeforeSignal = example.lines.length
        example.process.kill('SIGTERM')

        expect(await example.exited(), example.output()).toBe(0)
        const afterSignal = example.lines.slice(linesBeforeSignal).join('\n')
        expectLinesInOrder(afterSignal, [
          /^job-1: finished$/,
          /^SIGTERM: drained=true closed=true in \d+ ms$/,
          new RegExp(`^2 job\\(s\\) handed back to ${queue}$`),
          new RegExp(`^removed ${queue} and its \\.dlq and \\.parked$`),
          /^exiting$/,
        ])
        expect(example.output()).not.toMatch(/job-[23]: started/)
        expect(await admin.count(queue)).toBeUndefined()
      })
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )

  it(
    'run on its own, sends itself SIGTERM mid-job and exits 0 the same way',
    async () => {
      await withoutBrokerFaults(async () => {
        queue = uniqueName('examples.graceful-shutdown')
        const example = startExample('graceful-shutdown', { AMQP_URL, QUEUE: queue, JOB_MS: '500' })

        expect(await example.exited(), example.output()).toBe(0)
        expectLinesInOrder(example.output(), [
          /^job-1: started, takes 500 ms$/,
          /^sending SIGTERM to itself mid-job, as a deploy would$/,
          /^job-1: finished$/,
          /^SIGTERM: drained=true closed=true in \d+ ms$/,
          new RegExp(`^2 job\\(s\\) handed back to ${queue}$`),
          /^exiting$/,
        ])
      })
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )

  it(
    'runs twice with the same output and leaves no queue behind',
    async () => {
      await withoutBrokerFaults(async () => {
        queue = uniqueName('examples.graceful-shutdown')
        await expectRepeatable(
          'graceful-shutdown',
          { AMQP_URL, QUEUE: queue, JOB_MS: '300' },
          { queues: [queue, `${queue}.dlq`, `${queue}.parked`] },
        )
      })
    },
    LOCK_WAIT_TIMEOUT + 90_000,
  )
})
