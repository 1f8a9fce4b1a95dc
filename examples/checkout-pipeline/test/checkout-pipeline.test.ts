import { afterAll, beforeAll, describe, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'

const hasRabbit = await requireRabbit()
const STEPS = ['reserve', 'charge', 'ship']

describe.runIf(hasRabbit)('the checkout-pipeline example', () => {
  const checkout = uniqueName('examples.checkout')
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    for (const step of STEPS) {
      const queue = `${checkout}.${step}`
      await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    }
    await admin.close()
  })

  it(
    'reserves, charges and ships three orders (one charge retried), ends the out-of-stock run at reserve, and runs again the same way, leaving no queue behind',
    async () => {
      const queues = STEPS.flatMap((step) => {
        const queue = `${checkout}.${step}`
        return [queue, `${queue}.dlq`, `${queue}.parked`]
      })
      const output = await withoutBrokerFaults(() =>
        expectRepeatable('checkout-pipeline', { AMQP_URL, CHECKOUT: checkout }, { queues }),
      )

      expectLinesInOrder(output, [
        /^pipeline: reserve -> charge -> ship on .+\.reserve, .+\.charge, .+\.ship$/,
        /^sent: 4 orders$/,
        /^order-1: reserved, charged 40 on attempt 1, shipped \(res-order-1, pay-order-1\)$/,
        /^order-2: reserved, charge failed \(payment provider timed out\), charged 120 on attempt 2, shipped \(res-order-2, pay-order-2\)$/,
        /^order-3: sofa out of stock: the run ends here$/,
        /^order-4: reserved, charged 75 on attempt 1, shipped \(res-order-4, pay-order-4\)$/,
        /^runs: 4 entered, 3 completed, 1 ended early \(4 finished\)$/,
        /^removed .+\.reserve, .+\.charge, .+\.ship and their \.dlq and \.parked, and the exchange .+$/,
      ])
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
