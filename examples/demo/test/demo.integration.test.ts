import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import { AMQP_URL, DATABASE_URL, requirePostgres, requireRabbit } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { runExample } from '../../test-support/run-example.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { printedHealth, story } from './story.js'

const ready = (await requireRabbit()) && (await requirePostgres())

describe.runIf(ready)('pnpm demo with AMQP_URL and DATABASE_URL (RabbitMQ, Postgres)', () => {
  let code: number | string
  let output: string
  let admin: AmqpAdmin

  beforeAll(async () => {
    admin = await AmqpAdmin.open()
    ;({ code, output } = await withoutBrokerFaults(() =>
      runExample('demo', { AMQP_URL, DATABASE_URL }),
    ))
  }, LOCK_WAIT_TIMEOUT + 60_000)

  afterAll(async () => {
    await admin.close()
  })

  it('exits 0', () => {
    expect(code, output).toBe(0)
  })

  it('runs on RabbitMQ and Postgres, showing neither password', () => {
    expectLinesInOrder(output, [
      /transport +RabbitMQ at amqp:\/\/[^@]*@?[^ ]+$/,
      /store +Postgres at postgres:\/\/.+, table acemq_demo_[0-9a-f]{6}$/,
    ])
    expect(output).not.toMatch(/guest:guest@/)
  })

  it.each(story)('shows that %s', (_, lines) => {
    expectLinesInOrder(output, lines)
  })

  it('prints health JSON naming the AMQP transport and the Postgres store', () => {
    const health = printedHealth(output)
    expect(health.status).toBe('UP')
    expect(health.components['connection']?.['transport']).toMatch(/^amqp amqp:\/\//)
    expect(health.components['idempotency-store']).toEqual({ status: 'UP', store: 'postgres' })
  })

  it('deletes every queue it declared', async () => {
    const prefix = /── 1\. .* (demo-[0-9a-f]{6})\.payments$/m.exec(output)?.[1]
    expect(prefix).toBeDefined()
    for (const name of ['payments', 'invoices', 'invoices.retry.1s', 'shipping.dlq', 'packing']) {
      expect(await admin.count(`${prefix}.${name}`), name).toBeUndefined()
    }
  })

  it('drops its idempotency table', async () => {
    const table = /dropped table (acemq_demo_[0-9a-f]{6})$/m.exec(output)?.[1]
    expect(table).toBeDefined()
    const db = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: DATABASE_URL, max: 1 }),
      }),
    })
    try {
      const { rows } = await sql<{
        name: string | null
      }>`select to_regclass(${table}) as name`.execute(db)
      expect(rows[0]?.name).toBeNull()
    } finally {
      await db.destroy()
    }
  })
})
