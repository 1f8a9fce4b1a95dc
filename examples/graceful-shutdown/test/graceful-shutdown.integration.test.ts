import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '../../../test-support/services.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
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
          /^SIGTERM: drained=true closed=true in \d+ ms; exiting$/,
        ])
        expect(example.output()).not.toMatch(/job-[23]: started/)
        await admin.waitForCount(queue, 2, 5_000)
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
          /^SIGTERM: drained=true closed=true in \d+ ms; exiting$/,
        ])
      })
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
