import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { runExample } from '../../test-support/run-example.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the ordered-ledger example', () => {
  const ledger = uniqueName('examples.ordered-ledger')
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    for (let p = 0; p < 4; p++) {
      await admin.deleteQueues(`${ledger}.${p}`, `${ledger}.${p}.dlq`, `${ledger}.${p}.parked`)
    }
    await admin.close()
  })

  it(
    'books every account in order, halts the poisoned partition (health DEGRADED) until the operator resumes it, and exits 0',
    async () => {
      const { code, output } = await withoutBrokerFaults(() =>
        runExample('ordered-ledger', { AMQP_URL, LEDGER: ledger }),
      )

      expect(code, output).toBe(0)
      expect(output).not.toMatch(/OUT OF ORDER/)
      expectLinesInOrder(output, [
        /^halted: partitions (\d) \(.+\.\1\)$/,
        /^health: DEGRADED \{"partitions":"4","handled":"\d+","failed":"2","skipped":"0","halted":"\d"\}$/,
        /^meanwhile: \d+ entries booked; .*acct-3.* wait behind acct-3 #3$/,
        /^operator: corrected acct-3 #3 and resumed partition \d$/,
        /^health: UP$/,
        /^acct-1: 5 entries in order, balance 50$/,
        /^acct-3: 5 entries in order, balance 50$/,
        /^acct-6: 5 entries in order, balance 50$/,
        /^booked 30 entries \(30 handled, 2 failed runs\)$/,
      ])
      for (let p = 0; p < 4; p++) {
        expect(await admin.count(`${ledger}.${p}`)).toBe(0)
        expect(await admin.count(`${ledger}.${p}.dlq`)).toBe(0)
      }
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
