import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, RetryPolicy, Topology } from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { sql } from 'kysely'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { eventually, AMQP_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { effectsDatabase, type EffectsDatabase } from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)(
  'an idempotency store whose claims fail (a BEFORE INSERT trigger that raises)',
  () => {
    let database: EffectsDatabase
    let admin: AmqpAdmin
    let mq: AceMq
    const queue = uniqueName('e2e.trigger')
    const trigger = uniqueName('e2e_refuse').replace('.', '_')

    beforeAll(async () => {
      database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
      await sql
        .raw(
          `create function ${trigger}() returns trigger language plpgsql as $$ begin raise exception 'claims are refused today'; end $$;
         create trigger ${trigger} before insert on ${database.idempotencyTable} for each row execute function ${trigger}();`,
        )
        .execute(database.db)
      admin = await AmqpAdmin.open()
      mq = await connect(AMQP_URL)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    })

    afterAll(async () => {
      await mq.close({ drainTimeout: 0 })
      await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
      await admin.close()
      await sql.raw(`drop function if exists ${trigger}() cascade`).execute(database.db)
      await database.drop()
    })

    it('never runs or acks the message while claims fail, spends no attempt, and handles it once they work again', async () => {
      const store = new KyselyIdempotencyStore(database.db, { table: database.idempotencyTable })
      const failures: string[] = []
      const onError = (_error: unknown, context: string): void => {
        failures.push(context)
      }
      const failing = await connect(AMQP_URL, { onError })
      const attempts: number[] = []
      try {
        await failing.consume(
          queue,
          ConsumerOptions.defaults()
            .idempotent(store)
            .withRetry(RetryPolicy.fixed(2, 10))
            .withInProgressDelay(50),
          (message) => {
            attempts.push(message.envelope.attempt)
          },
        )
        await mq.publisher('', queue).send({ order: 1 }, { id: 'refused-1' })
        await eventually(() => failures.length >= 3, 10_000, 'three refused claims')
        expect(attempts).toEqual([])
        expect(failures[0]).toBe('the idempotency store could not claim message refused-1')
        expect(await admin.count(`${queue}.dlq`)).toBe(0)

        await sql
          .raw(`drop trigger ${trigger} on ${database.idempotencyTable}`)
          .execute(database.db)
        await eventually(
          () => attempts.length === 1,
          10_000,
          'the message handled once claims work',
        )
        expect(attempts).toEqual([1])
        await admin.waitForCount(queue, 0)
        expect(await admin.count(`${queue}.dlq`)).toBe(0)
      } finally {
        await failing.close({ drainTimeout: 0 })
      }
    }, 30_000)
  },
)
