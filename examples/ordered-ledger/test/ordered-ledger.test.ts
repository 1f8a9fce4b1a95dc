import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'

const hasRabbit = await requireRabbit()

const ACCOUNTS = ['acct-1', 'acct-2', 'acct-3', 'acct-4', 'acct-5', 'acct-6']

/** Each account's entries in the order the example's handler booked them, from its output. */
function bookedInOrder(output: string): Map<string, number[]> {
  const booked = new Map<string, number[]>()
  for (const line of output.split('\n')) {
    const match = /^booked (acct-\d+) #(\d+) \(\d+\)$/.exec(line)
    if (match === null) continue
    const [, account = '', seq = ''] = match
    booked.set(account, [...(booked.get(account) ?? []), Number(seq)])
  }
  return booked
}

describe.runIf(hasRabbit)('the ordered-ledger example', () => {
  const ledger = uniqueName('examples.ordered-ledger')
  const queues = Array.from({ length: 4 }, (_, p) => [
    `${ledger}.${p}`,
    `${ledger}.${p}.dlq`,
    `${ledger}.${p}.parked`,
  ]).flat()
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    // Only if a run failed half-way: a passing run removes them itself.
    await admin.deleteQueues(...queues)
    await admin.close()
  })

  it(
    'books every account in order, halts the poisoned partition (health DEGRADED) until the operator resumes it, leaves no queue behind and runs again the same way',
    async () => {
      const output = await withoutBrokerFaults(() =>
        expectRepeatable(
          'ordered-ledger',
          { AMQP_URL, LEDGER: ledger },
          { queues, anyOrder: true },
        ),
      )
      expect(output).not.toMatch(/OUT OF ORDER/)
      expectLinesInOrder(output, [
        /^halted: partitions (\d) \(.+\.\1\)$/,
        /^health: DEGRADED \{"partitions":"4","handled":"\d+","failed":"2","skipped":"0","halted":"\d"\}$/,
        /^meanwhile: \d+ entries booked; .*acct-3.* wait behind acct-3 #3$/,
        /^operator: corrected acct-3 #3 and resumed partition \d$/,
        /^health: UP$/,
        /^booked 30 entries \(30 handled, 2 failed runs\)$/,
        /^removed 4 partition queues and their \.dlq and \.parked$/,
      ])
      // The order is checked from what the handler booked, not from the example's own verdict:
      // each account's entries exactly once, 1 to 5, in that order.
      const booked = bookedInOrder(output)
      expect([...booked.keys()].sort()).toStrictEqual(ACCOUNTS)
      for (const account of ACCOUNTS) {
        expect(booked.get(account), account).toStrictEqual([1, 2, 3, 4, 5])
      }
    },
    LOCK_WAIT_TIMEOUT + 120_000,
  )
})
