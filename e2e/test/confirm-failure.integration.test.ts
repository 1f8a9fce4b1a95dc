import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConsumerOptions, RetryPolicy, Topology, type AceMq } from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { sql } from 'kysely'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { AMQP_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { effectsDatabase, type EffectsDatabase } from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(ready)('a confirm that fails once (a Postgres blip at the wrong moment)', () => {
  let database: EffectsDatabase
  let admin: AmqpAdmin
  let mq: AceMq
  const queue = uniqueName('e2e.confirm')
  const trigger = uniqueName('e2e_confirm_once').replace('.', '_')
  const reported: string[] = []

  beforeAll(async () => {
    database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
    // The first confirm (the upsert that sets confirmed = true) is refused; later ones pass.
    // A sequence, because a raised exception rolls back anything else the trigger writes.
    await sql
      .raw(
        `create sequence ${trigger}_seq;
         create function ${trigger}() returns trigger language plpgsql as $$
         begin
           if new.confirmed and not old.confirmed and nextval('${trigger}_seq') = 1 then
             raise exception 'the database went away while confirming';
           end if;
           return new;
         end $$;
         create trigger ${trigger} before update on ${database.idempotencyTable}
           for each row execute function ${trigger}();`,
      )
      .execute(database.db)
    admin = await AmqpAdmin.open()
    mq = await connect(AMQP_URL, { onError: (_error, context) => reported.push(context) })
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
  })

  afterAll(async () => {
    await mq.close({ drainTimeout: 0 })
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
    await sql.raw(`drop function if exists ${trigger}() cascade`).execute(database.db)
    await sql.raw(`drop sequence if exists ${trigger}_seq`).execute(database.db)
    await database.drop()
  })

  it('handles a message once when its confirm fails once and a second copy of it arrives (a publisher that retried a send whose confirm was lost)', async () => {
    const store = new KyselyIdempotencyStore(database.db, {
      table: database.idempotencyTable,
      claimTimeout: 1_000,
    })
    const handled: string[] = []
    await mq.consume(
      queue,
      ConsumerOptions.defaults()
        .idempotent(store)
        .withRetry(RetryPolicy.fixed(3, 10))
        .withInProgressDelay(100)
        .withPrefetch(1),
      (message) => {
        handled.push(message.envelope.id)
      },
    )
    const publisher = mq.publisher('', queue)
    await publisher.send({ order: 1 }, { id: 'confirm-once-1' })
    await publisher.send({ order: 1 }, { id: 'confirm-once-1' })
    // Both copies settle: the second waits out the first one's lease (1 s) at most.
    await admin.waitForCount(queue, 0, 10_000)
    await sleep(2_500)
    // The first confirm really was refused (the sequence moved past it), and retried in time.
    const refused = await sql<{
      last_value: string
    }>`select last_value from ${sql.table(`${trigger}_seq`)}`.execute(database.db)
    expect(Number(refused.rows[0]?.last_value)).toBeGreaterThanOrEqual(2)
    expect(reported).not.toContain('could not confirm message confirm-once-1')
    expect(
      handled,
      'the work was done and the engine knew it; a confirm retried before the ack would have made the second copy a duplicate',
    ).toEqual(['confirm-once-1'])
  }, 30_000)
})
