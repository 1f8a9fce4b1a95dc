import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, DATABASE_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { runExample } from '../../test-support/run-example.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)('the outbox-orders example', () => {
  const name = uniqueName('ex_outbox').replace('.', '_')
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await admin.deleteQueues(`${name}.placed`, `${name}.placed.dlq`, `${name}.placed.parked`)
    await admin.close()
  })

  it(
    'places 12 orders with their outbox records, relays them and handles each once, then exits 0',
    async () => {
      const { code, output } = await withoutBrokerFaults(() =>
        runExample('outbox-orders', { AMQP_URL, DATABASE_URL, ORDERS: '12', NAME: name }),
      )
      expect(code, output).toBe(0)
      expectLinesInOrder(output, [
        /^placed 12 orders$/,
        /^handled order-\d+ \(\d+\)$/,
        /^relay published 12; outbox UP with 0 pending$/,
        /^done$/,
      ])
      // Every order handled exactly once: a second "handled" line for one order is a duplicate.
      const handled = output
        .split('\n')
        .filter((line) => line.startsWith('handled '))
        .map((line) => line.split(' ')[1])
      expect(handled).toHaveLength(12)
      expect(new Set(handled).size).toBe(12)
      expect(await admin.count(`${name}.placed`)).toBe(0)
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
