import { Kysely, PostgresDialect, sql, type LogEvent } from 'kysely'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { DATABASE_URL, requirePostgres } from '@acemq/testing'
import { createTableSql, KyselyIdempotencyStore } from '../src/index.js'
import { uniqueTable } from './support/databases.js'

const available = await requirePostgres()

describe.runIf(available)('KyselyIdempotencyStore on Postgres, concurrent calls batched', () => {
  const opened: Kysely<Record<string, never>>[] = []
  const tables: string[] = []

  /** A Kysely instance that records the SQL of every statement it runs. */
  function open(): { db: Kysely<Record<string, never>>; statements: string[] } {
    const statements: string[] = []
    const db = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: DATABASE_URL, max: 5 }),
      }),
      log: (event: LogEvent) => {
        if (event.level === 'query') statements.push(event.query.sql)
      },
    })
    opened.push(db)
    return { db, statements }
  }

  async function table(db: Kysely<Record<string, never>>): Promise<string> {
    const name = uniqueTable()
    tables.push(name)
    await sql.raw(createTableSql({ table: name })).execute(db)
    return name
  }

  afterEach(async () => {
    const [first] = opened
    for (const name of tables.splice(0))
      await sql`drop table if exists ${sql.table(name)}`.execute(first!)
    for (const db of opened.splice(0)) await db.destroy()
  })

  const claims = (s: string[]): number =>
    s.filter((q) => q.includes('unnest') && q.includes('do nothing')).length
  const confirms = (s: string[]): number =>
    s.filter((q) => q.includes('unnest') && q.includes('do update')).length

  it('claims 50 ids asked for at once with one insert, each claimed once, and confirms them with one upsert', async () => {
    const { db, statements } = open()
    const store = new KyselyIdempotencyStore(db, { table: await table(db), purgeEvery: 0 })
    const ids = Array.from({ length: 50 }, (_, i) => `order-${i}`)
    const owners = ids.map((id) => `owner-${id}`)
    expect(await Promise.all(ids.map((id, i) => store.tryClaim(id, owners[i])))).toEqual(
      ids.map(() => 'claimed'),
    )
    expect(claims(statements)).toBe(1)
    await Promise.all(ids.map((id, i) => store.confirm(id, owners[i])))
    expect(confirms(statements)).toBe(1)
    expect(await Promise.all(ids.map((id) => store.tryClaim(id, 'someone-else')))).toEqual(
      ids.map(() => 'duplicate'),
    )
  })

  it('one id asked for ten times at once, in one store and in another, is claimed exactly once', async () => {
    const one = open()
    const two = open()
    const name = await table(one.db)
    const first = new KyselyIdempotencyStore(one.db, { table: name, purgeEvery: 0 })
    const second = new KyselyIdempotencyStore(two.db, { table: name, purgeEvery: 0 })
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 === 0 ? first : second).tryClaim('the-same', `owner-${i}`),
      ),
    )
    expect(results.filter((r) => r === 'claimed')).toHaveLength(1)
    expect(results.filter((r) => r === 'in_progress')).toHaveLength(19)
  })

  it('claims already in the table are read one by one after the batch: duplicate, in progress, taken over', async () => {
    const { db } = open()
    const name = await table(db)
    const store = new KyselyIdempotencyStore(db, {
      table: name,
      purgeEvery: 0,
      claimTimeout: 1_000,
    })
    await store.tryClaim('done', 'a')
    await store.confirm('done', 'a')
    await store.tryClaim('busy', 'a')
    await store.tryClaim('stale', 'a')
    await sql`update ${sql.table(name)} set claimed_at = claimed_at - 60000 where id = 'stale'`.execute(
      db,
    )
    expect(
      await Promise.all([
        store.tryClaim('done', 'b'),
        store.tryClaim('busy', 'b'),
        store.tryClaim('stale', 'b'),
        store.tryClaim('fresh', 'b'),
      ]),
    ).toEqual(['duplicate', 'in_progress', 'claimed', 'claimed'])
  })

  it('a batch the database refuses fails every call in it, each with the error', async () => {
    const { db } = open()
    const name = await table(db)
    const store = new KyselyIdempotencyStore(db, { table: name, purgeEvery: 0 })
    await sql`drop table ${sql.table(name)}`.execute(db)
    const results = await Promise.allSettled(['a', 'b', 'c'].map((id) => store.tryClaim(id)))
    for (const result of results) {
      expect(result.status).toBe('rejected')
      expect((result as PromiseRejectedResult).reason).toMatchObject({
        code: 'ACEMQ_STORE_TABLE_MISSING',
      })
    }
  })
})
