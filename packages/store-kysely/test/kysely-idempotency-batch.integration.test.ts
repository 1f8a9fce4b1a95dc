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

  /** A Kysely instance that records the SQL of every statement it runs, and its parameters. */
  function open(): {
    db: Kysely<Record<string, never>>
    statements: string[]
    parameters: (readonly unknown[])[]
  } {
    const statements: string[] = []
    const parameters: (readonly unknown[])[] = []
    const db = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: DATABASE_URL, max: 5 }),
      }),
      log: (event: LogEvent) => {
        if (event.level !== 'query') return
        statements.push(event.query.sql)
        parameters.push(event.query.parameters)
      },
    })
    opened.push(db)
    return { db, statements, parameters }
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

  /** The rows of `name`, by id: who owns each, since when, and whether it is confirmed. */
  async function rows(
    db: Kysely<Record<string, never>>,
    name: string,
  ): Promise<{ id: string; owner: string; claimed_at: string; confirmed: boolean }[]> {
    const result = await sql<{ id: string; owner: string; claimed_at: string; confirmed: boolean }>`
      select id, owner, claimed_at::text as claimed_at, confirmed from ${sql.table(name)} order by id collate "C"`.execute(
      db,
    )
    return result.rows
  }

  it('writes a batch with its ids in id order, each with its own owner and the store’s clock', async () => {
    const { db, statements, parameters } = open()
    const name = await table(db)
    const store = new KyselyIdempotencyStore(db, { table: name, purgeEvery: 0, now: () => 1_234 })
    // Not in order, with a prefix of another id, and owners that do not sort with their ids.
    const ids = ['m-3', 'm-10', 'm-1', 'm-2', 'm', 'm-20', 'm-11']
    const owner = (id: string): string => `owner-of-${id.length}-${id}`
    expect(await Promise.all(ids.map((id) => store.tryClaim(id, owner(id))))).toEqual(
      ids.map(() => 'claimed'),
    )
    const sorted = [...ids].sort()
    const arrays = (at: number): unknown[] =>
      (parameters[at] ?? []).filter((value) => Array.isArray(value))
    const insert = statements.findIndex((q) => q.includes('unnest') && q.includes('do nothing'))
    expect(arrays(insert)).toEqual([sorted, sorted.map(owner)])
    expect(await rows(db, name)).toEqual(
      sorted.map((id) => ({ id, owner: owner(id), claimed_at: '1234', confirmed: false })),
    )
    await Promise.all([...ids].reverse().map((id) => store.confirm(id, owner(id))))
    const upsert = statements.findIndex((q) => q.includes('unnest') && q.includes('do update'))
    expect(arrays(upsert)).toEqual([sorted, sorted.map(owner)])
    expect((await rows(db, name)).map((row) => row.confirmed)).toEqual(ids.map(() => true))
  })

  it('an id already waiting for the batch is claimed or confirmed alone, not twice in one statement', async () => {
    const { db, statements } = open()
    const store = new KyselyIdempotencyStore(db, { table: await table(db), purgeEvery: 0 })
    const plain = (kind: string): number =>
      statements.filter((q) => q.startsWith('insert') && !q.includes('unnest') && q.includes(kind))
        .length
    const results = await Promise.all([
      store.tryClaim('twice', 'a'),
      store.tryClaim('other', 'a'),
      store.tryClaim('twice', 'b'),
    ])
    expect(results.filter((r) => r === 'claimed')).toHaveLength(2)
    expect(results[1]).toBe('claimed')
    expect(results.filter((r) => r === 'in_progress')).toHaveLength(1)
    expect([claims(statements), plain('do nothing')]).toEqual([1, 1])
    await Promise.all([
      store.confirm('twice', 'a'),
      store.confirm('other', 'a'),
      store.confirm('twice', 'b'),
    ])
    expect([confirms(statements), plain('do update')]).toEqual([1, 1])
    expect(await store.tryClaim('twice', 'c')).toBe('duplicate')
    expect(await store.tryClaim('other', 'c')).toBe('duplicate')
  })
})
