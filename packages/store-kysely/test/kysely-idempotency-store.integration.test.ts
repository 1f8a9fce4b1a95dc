import { CamelCasePlugin, sql } from 'kysely'
import { expect, it, vi } from 'vitest'
import { requirePostgres } from '@acemq/testing'
import { createTableSql, KyselyIdempotencyStore } from '../src/index.js'
import { postgres, uniqueTable } from './support/databases.js'
import { serverStoreSuite } from './support/server-store-suite.js'

serverStoreSuite(
  {
    name: 'Postgres',
    dialect: 'postgres',
    open: postgres,
    notNullError: { code: '23502' },
    available: await requirePostgres(),
  },
  (t) => {
    it('creates a table with the documented columns, and running the DDL twice is harmless', async () => {
      await sql.raw(createTableSql({ table: t.table })).execute(t.db)
      const { rows } = await sql<{ column_name: string; data_type: string; is_nullable: string }>`
      select column_name, data_type, is_nullable from information_schema.columns
      where table_name = ${t.table} order by ordinal_position`.execute(t.db)
      expect(rows.map((r) => [r.column_name, r.data_type, r.is_nullable])).toEqual([
        ['id', 'text', 'NO'],
        ['owner', 'text', 'NO'],
        ['claimed_at', 'bigint', 'NO'],
        ['confirmed', 'boolean', 'NO'],
        ['confirmed_at', 'bigint', 'YES'],
      ])
      const indexes = await sql<{ indexname: string }>`
      select indexname from pg_indexes where tablename = ${t.table}`.execute(t.db)
      expect(indexes.rows.map((r) => r.indexname)).toContain(`${t.table}_claimed_at_idx`)
    })

    it('works on a schema-qualified table', async () => {
      const schema = uniqueTable('acemq_schema')
      await sql`create schema ${sql.id(schema)}`.execute(t.db)
      try {
        await sql.raw(createTableSql({ table: `${schema}.seen` })).execute(t.db)
        const inSchema = t.store({ table: `${schema}.seen` })
        expect(await inSchema.tryClaim('m-1')).toBe('claimed')
        await inSchema.confirm('m-1')
        expect(await inSchema.tryClaim('m-1')).toBe('duplicate')
      } finally {
        await sql`drop schema ${sql.id(schema)} cascade`.execute(t.db)
      }
    })

    it('rejects a claim that a BEFORE INSERT trigger refuses, instead of calling it taken', async () => {
      const fn = `${t.table}_refuse`
      await sql
        .raw(
          `create function ${fn}() returns trigger language plpgsql as $$ begin raise exception 'disk on fire'; end $$;
         create trigger ${fn} before insert on ${t.table} for each row execute function ${fn}();`,
        )
        .execute(t.db)
      try {
        await expect(t.store().tryClaim('m-1')).rejects.toThrow('disk on fire')
        await expect(t.store().claim('m-1')).rejects.toThrow('disk on fire')
      } finally {
        await sql.raw(`drop table ${t.table}; drop function ${fn}();`).execute(t.db)
      }
    })

    it('rejects a claim that times out waiting for a lock, instead of calling it taken', async () => {
      const impatient = postgres({ max: 2, pgOptions: '-c lock_timeout=200' })
      try {
        await t.db
          .transaction()
          .execute(async (trx) => {
            // An uncommitted claim on the same id: the store's insert has to wait for it.
            await sql`insert into ${sql.table(t.table)} (id, owner, claimed_at, confirmed) values ('m-1', 'x', 0, false)`.execute(
              trx,
            )
            await expect(
              new KyselyIdempotencyStore(impatient, { table: t.table }).tryClaim('m-1'),
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
        const a = new KyselyIdempotencyStore(camel, { table: t.table })
        const b = new KyselyIdempotencyStore(camel, { table: t.table })
        expect(await a.tryClaim('m-1')).toBe('claimed')
        expect(await b.tryClaim('m-1')).toBe('in_progress')
        await a.confirm('m-1')
        expect(await b.tryClaim('m-1')).toBe('duplicate')
      } finally {
        await camel.destroy()
      }
    })

    it('stores keys as UTF-8 text: the same string from two stores is one row', async () => {
      const a = t.store()
      const b = t.store()
      const id = 'zamówienie-🚀-注文'
      await a.tryClaim(id)
      expect(await b.tryClaim(id)).toBe('in_progress')
      const { rows } = await sql<{ id: string; bytes: number }>`
      select id, octet_length(id) as bytes from ${sql.table(t.table)}`.execute(t.db)
      expect(rows).toEqual([{ id, bytes: Buffer.byteLength(id, 'utf8') }])
    })

    it('reports a failed purge without failing the claim that triggered it', async () => {
      const expired = t.store({ retention: 1_000, purgeEvery: 0 })
      await expired.tryClaim('old')
      await expired.confirm('old')
      t.clock += 2_000
      const fn = `${t.table}_nodelete`
      await sql
        .raw(
          `create function ${fn}() returns trigger language plpgsql as $$ begin raise exception 'no deletes today'; end $$;
         create trigger ${fn} before delete on ${t.table} for each row execute function ${fn}();`,
        )
        .execute(t.db)
      try {
        const onError = vi.fn()
        const s = t.store({ retention: 1_000, claimTimeout: 100, purgeEvery: 1, onError })
        expect(await s.tryClaim('new')).toBe('claimed')
        await vi.waitFor(() => expect(onError).toHaveBeenCalledTimes(1))
        expect(String(onError.mock.calls[0]?.[0])).toContain('no deletes today')
      } finally {
        await sql.raw(`drop table ${t.table}; drop function ${fn}();`).execute(t.db)
      }
    })
  },
)
