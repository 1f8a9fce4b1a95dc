import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)('the outbox-orders example', () => {
  const name = uniqueName('ex_outbox').replace('.', '_')
  const queues = [`${name}.placed`, `${name}.placed.dlq`, `${name}.placed.parked`]
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
    'places 12 orders with their outbox records, relays them, handles each exactly once, leaves no queue behind and runs again the same way',
    async () => {
      const output = await withoutBrokerFaults(() =>
        expectRepeatable(
          'outbox-orders',
          { AMQP_URL, DATABASE_URL, ORDERS: '12', NAME: name },
          { queues, anyOrder: true },
        ),
      )
      expectLinesInOrder(output, [
        /^placed 12 orders$/,
        /^handled order-\d+ \(\d+\)$/,
        /^relay published 12; outbox UP with 0 pending$/,
        new RegExp(`^removed ${name}\\.placed and its \\.dlq and \\.parked$`),
        /^done$/,
      ])
      // Every handled line counts: a copy handled twice prints its line twice.
      const handled = output
        .split('\n')
        .filter((line) => line.startsWith('handled '))
        .map((line) => line.replace(/ \(\d+\)$/, '').replace(/^handled /, ''))
        .sort()
      const expected = Array.from({ length: 12 }, (_, i) => `order-${i + 1}`).sort()
      expect(handled).toStrictEqual(expected)
    },
    LOCK_WAIT_TIMEOUT + 120_000,
  )
})
