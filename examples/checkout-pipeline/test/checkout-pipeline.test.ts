import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '../../../test-support/services.js'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { runExample } from '../../test-support/run-example.js'

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
    'reserves, charges and ships three orders (one charge retried), ends the out-of-stock run at reserve, and exits 0',
    async () => {
      const { code, output } = await withoutBrokerFaults(() =>
        runExample('checkout-pipeline', { AMQP_URL, CHECKOUT: checkout }),
      )

      expect(code, output).toBe(0)
      expectLinesInOrder(output, [
        /^pipeline: reserve -> charge -> ship on .+\.reserve, .+\.charge, .+\.ship$/,
        /^sent: 4 orders$/,
        /^order-1: reserved, charged 40 on attempt 1, shipped \(res-order-1, pay-order-1\)$/,
        /^order-2: reserved, charge failed \(payment provider timed out\), charged 120 on attempt 2, shipped \(res-order-2, pay-order-2\)$/,
        /^order-3: sofa out of stock: the run ends here$/,
        /^order-4: reserved, charged 75 on attempt 1, shipped \(res-order-4, pay-order-4\)$/,
        /^runs: 4 entered, 3 completed, 1 ended early \(4 finished\)$/,
      ])
      for (const step of STEPS) {
        const queue = `${checkout}.${step}`
        expect(await admin.count(queue)).toBe(0)
        expect(await admin.count(`${queue}.dlq`)).toBe(0)
        expect(await admin.count(`${queue}.parked`)).toBe(0)
      }
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
