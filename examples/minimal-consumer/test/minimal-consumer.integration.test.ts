import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { runExample } from '../../test-support/run-example.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the minimal-consumer example', () => {
  const queue = uniqueName('examples.minimal-consumer')
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
  })

  it(
    'retries the failed first attempt, handles the order on the second and exits 0',
    async () => {
      const { code, output } = await withoutBrokerFaults(() =>
        runExample('minimal-consumer', { AMQP_URL, QUEUE: queue }),
      )

      expect(code, output).toBe(0)
      expectLinesInOrder(output, [
        /^order-1: attempt 1$/,
        /^order-1: attempt 2$/,
        /^handled; closing$/,
        new RegExp(`^removed ${queue} and its \\.dlq and \\.parked$`),
      ])
      for (const name of [queue, `${queue}.dlq`, `${queue}.parked`]) {
        expect(await admin.count(name), name).toBeUndefined()
      }
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )

  it(
    'runs twice with the same output and leaves no queue behind',
    async () => {
      await withoutBrokerFaults(() =>
        expectRepeatable(
          'minimal-consumer',
          { AMQP_URL, QUEUE: queue },
          { queues: [queue, `${queue}.dlq`, `${queue}.parked`] },
        ),
      )
    },
    LOCK_WAIT_TIMEOUT + 90_000,
  )
})
