import { CamelCasePlugin, Migrator, sql, type Kysely } from 'kysely'
import { afterAll, beforeAll, beforeEach, afterEach, describe, expect, it, vi } from 'vitest'
import { idempotencyStoreConformance } from '../../../test-support/idempotency-conformance.js'
import { requirePostgres } from '../../../test-support/services.js'
import {
  createTableSql,
  idempotencyMigration,
  KyselyIdempotencyStore,
  type KyselyIdempotencyStoreOptions,
} from '../src/index.js'
import { postgres, uniqueTable, type AppDatabase } from './support/databases.js'

const hasPg = await requirePostgres()

async function createTable(db: Kysely<AppDatabase>, table: string): Promise<void> {
  // Postgres takes the whole DDL (several statements) in one simple query.
  await sql.raw(createTableSql({ table, dialect: 'postgres' })).execute(db)
}

async function dropTable(db: Kysely<AppDatabase>, table: string): Promise<void> {
  await sql`drop table if exists ${sql.table(table)}`.execute(db)
}

if (hasPg) {
  idempotencyStoreConformance('KyselyIdempotencyStore on Postgres', {
    async create({ claimTimeoutMs, retentionMs, now }) {
      const db = postgres({ max: 12 })
      const table = uniqueTable()
      await createTable(db, table)
      const options: KyselyIdempotencyStoreOptions = {
        table,
        claimTimeout: claimTimeoutMs,
        retention: retentionMs,
        now,
      }
      return {
        store: new KyselyIdempotencyStore(db, options),
        second: async () => new KyselyIdempotencyStore(db, options),
        async cleanup() {
          await dropTable(db, table)
          await db.destroy()
        },
      }
    },
  })
}

describe.runIf(hasPg)('KyselyIdempotencyStore on Postgres', () => {
  let db: Kysely<AppDatabase>
  let table: string
  let clock: number
  const count = async (): Promise<number> => {
    const { rows } = await sql<{
      n: string
    }>`select count(*) as n from ${sql.table(table)}`.execute(db)
    return Number(rows[0]?.n)
  }

  beforeAll(() => {
    db = postgres()
  })

  afterAll(async () => {
    await db.destroy()
  })

  beforeEach(async () => {
    clock = Date.UTC(2030, 0, 1)
    table = uniqueTable()
    await createTable(db, table)
  })

  afterEach(async () => {
    await dropTable(db, table)
  })

  const store = (options: KyselyIdempotencyStoreOptions = {}): KyselyIdempotencyStore =>
    new KyselyIdempotencyStore(db, { table, now: () => clock, ...options })

  it('tells the dialect from the adapter', () => {
    expect(store().dialect).toBe('postgres')
  })

  it('creates a table with the documented columns, and running the DDL twice is harmless', async () => {
    await createTable(db, table)
    const { rows } = await sql<{ column_name: string; data_type: string; is_nullable: string }>`
      select column_name, data_type, is_nullable from information_schema.columns
      where table_name = ${table} order by ordinal_position`.execute(db)
    expect(rows.map((r) => [r.column_name, r.data_type, r.is_nullable])).toEqual([
      ['id', 'text', 'NO'],
      ['owner', 'text', 'NO'],
      ['claimed_at', 'bigint', 'NO'],
      ['confirmed', 'boolean', 'NO'],
      ['confirmed_at', 'bigint', 'YES'],
    ])
    const indexes = await sql<{ indexname: string }>`
      select indexname from pg_indexes where tablename = ${table}`.execute(db)
    expect(indexes.rows.map((r) => r.indexname)).toContain(`${table}_claimed_at_idx`)
  })

  it('works on a schema-qualified table', async () => {
    const schema = uniqueTable('acemq_schema')
    await sql`create schema ${sql.id(schema)}`.execute(db)
    try {
      await sql.raw(createTableSql({ table: `${schema}.seen` })).execute(db)
      const inSchema = store({ table: `${schema}.seen` })
      expect(await inSchema.tryClaim('m-1')).toBe('claimed')
      await inSchema.confirm('m-1')
      expect(await inSchema.tryClaim('m-1')).toBe('duplicate')
    } finally {
      await sql`drop schema ${sql.id(schema)} cascade`.execute(db)
    }
  })

  it('creates and drops the table through a Kysely Migrator', async () => {
    const migrated = uniqueTable()
    const migrator = new Migrator({
      db,
      migrationTableName: `${migrated}_migrations`,
      migrationLockTableName: `${migrated}_migrations_lock`,
      provider: {
        getMigrations: async () => ({
          '0001_acemq_idempotency': idempotencyMigration({ table: migrated }),
        }),
      },
    })
    try {
      const up = await migrator.migrateToLatest()
      expect(up.error).toBeUndefined()
      expect(await store({ table: migrated }).tryClaim('m-1')).toBe('claimed')
      const down = await migrator.migrateDown()
      expect(down.error).toBeUndefined()
      const { rows } = await sql<{
        t: string | null
      }>`select to_regclass(${migrated}) as t`.execute(db)
      expect(rows[0]?.t).toBeNull()
    } finally {
      await dropTable(db, migrated)
      await dropTable(db, `${migrated}_migrations`)
      await dropTable(db, `${migrated}_migrations_lock`)
    }
  })

  it('rejects a claim that a BEFORE INSERT trigger refuses, instead of calling it taken', async () => {
    const fn = `${table}_refuse`
    await sql
      .raw(
        `create function ${fn}() returns trigger language plpgsql as $$ begin raise exception 'disk on fire'; end $$;
         create trigger ${fn} before insert on ${table} for each row execute function ${fn}();`,
      )
      .execute(db)
    try {
      await expect(store().tryClaim('m-1')).rejects.toThrow('disk on fire')
      await expect(store().claim('m-1')).rejects.toThrow('disk on fire')
    } finally {
      await sql.raw(`drop table ${table}; drop function ${fn}();`).execute(db)
    }
  })

  it('rejects a claim that violates a NOT NULL constraint', async () => {
    await sql`alter table ${sql.table(table)} add column tenant text not null`.execute(db)
    await expect(store().tryClaim('m-1')).rejects.toMatchObject({
      code: '23502',
      message: expect.stringContaining('tenant'),
    })
  })

  it('rejects a claim that times out waiting for a lock, instead of calling it taken', async () => {
    const impatient = postgres({ max: 2, pgOptions: '-c lock_timeout=200' })
    try {
      await db
        .transaction()
        .execute(async (trx) => {
          // An uncommitted claim on the same id: the store's insert has to wait for it.
          await sql`insert into ${sql.table(table)} (id, owner, claimed_at, confirmed) values ('m-1', 'x', 0, false)`.execute(
            trx,
          )
          await expect(
            new KyselyIdempotencyStore(impatient, { table }).tryClaim('m-1'),
          ).rejects.toMatchObject({ code: '55P03' })
          throw new Error('roll back')
        })
        .catch((error: unknown) => {
          if (!(error instanceof Error) || error.message !== 'roll back') throw error
        })
    } finally {
      await impatient.destroy()
    }
  })

  it("leaves the caller's plugins out of its own SQL", async () => {
    const camel = postgres({ max: 2, plugins: [new CamelCasePlugin()] })
    try {
      const a = new KyselyIdempotencyStore(camel, { table })
      const b = new KyselyIdempotencyStore(camel, { table })
      expect(await a.tryClaim('m-1')).toBe('claimed')
      expect(await b.tryClaim('m-1')).toBe('in_progress')
      await a.confirm('m-1')
      expect(await b.tryClaim('m-1')).toBe('duplicate')
    } finally {
      await camel.destroy()
    }
  })

  it('stores keys as UTF-8 text: the same string from two stores is one row', async () => {
    const a = store()
    const b = store()
    const id = 'zamówienie-🚀-注文'
    await a.tryClaim(id)
    expect(await b.tryClaim(id)).toBe('in_progress')
    const { rows } = await sql<{ id: string; bytes: number }>`
      select id, octet_length(id) as bytes from ${sql.table(table)}`.execute(db)
    expect(rows).toEqual([{ id, bytes: Buffer.byteLength(id, 'utf8') }])
  })

  it('gives each of 300 ids to exactly one of 16 stores claiming them all at once', async () => {
    const wide = postgres({ max: 16 })
    try {
      const stores = Array.from({ length: 16 }, () => new KyselyIdempotencyStore(wide, { table }))
      const ids = Array.from({ length: 300 }, (_, i) => `order-${i}`)
      const started = performance.now()
      const results = await Promise.all(
        stores.map(async (s) => {
          const claimed: string[] = []
          for (const id of ids) if ((await s.tryClaim(id)) === 'claimed') claimed.push(id)
          return claimed
        }),
      )
      const elapsed = performance.now() - started
      const all = results.flat()
      expect(all).toHaveLength(ids.length)
      expect(new Set(all).size).toBe(ids.length)
      console.log(
        `Postgres: 16 stores x ${ids.length} ids, claims per store ${results.map((r) => r.length).join('/')}, ${elapsed.toFixed(0)} ms`,
      )
    } finally {
      await wide.destroy()
    }
  })

  it('gives each of 100 stale claims to exactly one of 16 stores taking them over at once', async () => {
    const wide = postgres({ max: 16 })
    try {
      const ids = Array.from({ length: 100 }, (_, i) => `stale-${i}`)
      const crashed = new KyselyIdempotencyStore(wide, { table, now: () => clock - 600_000 })
      for (const id of ids) await crashed.tryClaim(id)
      const stores = Array.from(
        { length: 16 },
        () => new KyselyIdempotencyStore(wide, { table, now: () => clock }),
      )
      const results = await Promise.all(
        ids.map((id) => Promise.all(stores.map((s) => s.tryClaim(id)))),
      )
      for (const answers of results) {
        expect(answers.filter((a) => a === 'claimed')).toHaveLength(1)
        expect(answers.filter((a) => a === 'in_progress')).toHaveLength(15)
      }
    } finally {
      await wide.destroy()
    }
  })

  describe('purging', () => {
    const retention = 1_000
    beforeEach(async () => {
      const seed = store({ retention, claimTimeout: 100, purgeEvery: 0 })
      for (let i = 0; i < 250; i++) {
        await seed.tryClaim(`old-${i}`)
        await seed.confirm(`old-${i}`)
      }
      await seed.tryClaim('old-unconfirmed')
      clock += 2_000
    })

    it('deletes expired rows in batches of purgeBatchSize and keeps live ones', async () => {
      const s = store({ retention, claimTimeout: 100, purgeEvery: 0, purgeBatchSize: 100 })
      await s.tryClaim('live')
      await s.tryClaim('recent')
      await s.confirm('recent')
      expect(await count()).toBe(253)
      expect(await s.purgeExpired()).toBe(100)
      expect(await count()).toBe(153)
      expect(await s.purgeExpired()).toBe(100)
      expect(await s.purgeExpired()).toBe(51)
      expect(await s.purgeExpired()).toBe(0)
      expect(await count()).toBe(2)
      expect(await s.isConfirmed('recent')).toBe(true)
    })

    it('purges one batch in the background on every purgeEvery-th claim, not on every call', async () => {
      const s = store({ retention, claimTimeout: 100, purgeEvery: 5, purgeBatchSize: 10 })
      for (let i = 1; i <= 4; i++) await s.tryClaim(`new-${i}`)
      expect(await count()).toBe(251 + 4)
      await s.tryClaim('new-5')
      await s.close()
      expect(await count()).toBe(251 + 5 - 10)
    })

    it('reports a failed purge without failing the claim that triggered it', async () => {
      const fn = `${table}_nodelete`
      await sql
        .raw(
          `create function ${fn}() returns trigger language plpgsql as $$ begin raise exception 'no deletes today'; end $$;
           create trigger ${fn} before delete on ${table} for each row execute function ${fn}();`,
        )
        .execute(db)
      try {
        const onError = vi.fn()
        const s = store({ retention, claimTimeout: 100, purgeEvery: 1, onError })
        expect(await s.tryClaim('new')).toBe('claimed')
        await vi.waitFor(() => expect(onError).toHaveBeenCalledTimes(1))
        expect(String(onError.mock.calls[0]?.[0])).toContain('no deletes today')
      } finally {
        await sql.raw(`drop table ${table}; drop function ${fn}();`).execute(db)
      }
    })
  })
})
