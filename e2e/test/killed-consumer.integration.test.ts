import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, Topology } from '@acemq/core'
import { createTableSql } from '@acemq/store-kysely'
import { AmqpTransport } from '@acemq/transport-amqp'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { AMQP_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { effectsDatabase, startProgram, type EffectsDatabase } from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())
const CLAIM_TIMEOUT_MS = 3_000

describe.runIf(ready)('a consumer process killed inside its handler', () => {
  let database: EffectsDatabase
  let admin: AmqpAdmin
  const queue = uniqueName('e2e.kill')

  beforeAll(async () => {
    database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
    admin = await AmqpAdmin.open()
    const mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    await mq.publisher('', queue).send({ n: 1 }, { id: 'killed-1' })
    await mq.close()
  })

  afterAll(async () => {
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
    await database.drop()
  })

  it('leaves a lease that another process takes over after the claim timeout, handling the message exactly once', async () => {
    const env = {
      QUEUE: queue,
      IDEMPOTENCY_TABLE: database.idempotencyTable,
      EFFECTS_TABLE: database.effectsTable,
      CLAIM_TIMEOUT_MS: String(CLAIM_TIMEOUT_MS),
    }
    const doomed = startProgram('idempotent-worker', {
      ...env,
      WORKER_NAME: 'doomed',
      WORKER_MODE: 'hang',
    })
    await doomed.waitFor(/^HANDLING killed-1$/)
    const killedAt = Date.now()
    doomed.process.kill('SIGKILL')
    expect(await doomed.exited).toBe('SIGKILL')

    const survivor = startProgram('idempotent-worker', { ...env, WORKER_NAME: 'survivor' })
    try {
      await survivor.waitFor(/^HANDLING killed-1$/, 30_000)
      const handledAfter = Date.now() - killedAt
      await admin.waitForCount(queue, 0, 10_000)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const effects = await database.effects()
      expect(effects.get('killed-1')).toEqual(['survivor'])
      // The survivor waited out the dead process's lease instead of handling it at once.
      expect(handledAfter).toBeGreaterThanOrEqual(CLAIM_TIMEOUT_MS - 500)
      expect(await admin.count(`${queue}.dlq`)).toBe(0)
    } finally {
      survivor.process.kill('SIGTERM')
      await survivor.exited
    }
  }, 60_000)
})
