import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { createTableSql } from '@acemq/store-kysely'
import { AmqpTransport } from '@acemq/transport-amqp'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { AMQP_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { effectsDatabase, startProgram, type EffectsDatabase } from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)('a consumer process sent SIGTERM', () => {
  let database: EffectsDatabase
  let admin: AmqpAdmin
  const queue = uniqueName('e2e.sigterm')

  beforeAll(async () => {
    database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
    admin = await AmqpAdmin.open()
    const mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    await mq.close()
  })

  afterAll(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
    await database.drop()
  })

  it('finishes the handler it is running, hands the rest back, and exits 0', async () => {
    const worker = startProgram('idempotent-worker', {
      QUEUE: queue,
      IDEMPOTENCY_TABLE: database.idempotencyTable,
      EFFECTS_TABLE: database.effectsTable,
      CLAIM_TIMEOUT_MS: '60000',
      WORKER_NAME: 'graceful',
      HANDLER_MS: '800',
      PREFETCH: '10',
    })
    await worker.waitFor(/^READY$/)
    const mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    await mq.publisher('', queue).sendAll([1, 2, 3].map((n) => ({ n })))
    await mq.close()
    const first = await worker.waitFor(/^HANDLING /)
    worker.process.kill('SIGTERM')
    expect(await worker.exited).toBe(0)
    expect(worker.lines.find((l) => l.startsWith('SHUTDOWN'))).toMatch(
      /^SHUTDOWN SIGTERM drained=true closed=true ms=\d+$/,
    )
    const effects = await database.effects()
    const handled = first.replace('HANDLING ', '')
    expect(effects.get(handled)).toEqual(['graceful'])
    expect(effects.size).toBe(1)
    await admin.waitForCount(queue, 2, 5_000)
  }, 60_000)
})
