import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectRepeatable } from '../../test-support/repeatable.js'
import { runExample } from '../../test-support/run-example.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the interceptors example', () => {
  const queue = uniqueName('examples.interceptors')
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
  })

  it(
    'stamps every publish, audits the handled order, refuses the unknown tenant to the dlq and exits 0',
    async () => {
      const { code, output } = await withoutBrokerFaults(() =>
        runExample('interceptors', { AMQP_URL, QUEUE: queue }),
      )

      expect(code, output).toBe(0)
      expectLinesInOrder(output, [
        /^handled order-1 for acme, sent by orders-api$/,
        /^audit: order-1 \(acme\) -> accept$/,
        new RegExp(
          `^in ${queue}\\.dlq: order-2: an interceptor refused it: unknown tenant 'initech'$`,
        ),
        new RegExp(`^removed ${queue} and its \\.dlq and \\.parked$`),
      ])
      // The refusal is the only message that did not reach the handler, and it was not audited.
      expect(output).not.toMatch(/audit: order-2/)
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
          'interceptors',
          { AMQP_URL, QUEUE: queue },
          { queues: [queue, `${queue}.dlq`, `${queue}.parked`] },
        ),
      )
    },
    LOCK_WAIT_TIMEOUT + 90_000,
  )
})
