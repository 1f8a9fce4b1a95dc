import { sql } from 'kysely'
import { expect, it } from 'vitest'
import { requireMysql } from '@acemq/testing'
import { idempotencyMigration } from '../src/index.js'
import { mysql } from './support/databases.js'
import { serverStoreSuite } from './support/server-store-suite.js'

// The MySQL path (a plain INSERT where only a duplicate key means "taken", ON DUPLICATE KEY
// UPDATE, DELETE ... LIMIT) against a real server: the machine's MariaDB.
serverStoreSuite(
  {
    name: 'MariaDB',
    dialect: 'mysql',
    open: mysql,
    notNullError: { code: 'ER_NO_DEFAULT_FOR_FIELD' },
    available: await requireMysql(),
  },
  (t) => {
    it('creates a table with the documented columns and index, and running the DDL twice is harmless', async () => {
      await idempotencyMigration({ table: t.table }).up(t.db)
      const { rows } = await sql<{ name: string; type: string; nullable: string }>`
          select column_name as name, column_type as type, is_nullable as nullable
          from information_schema.columns
          where table_schema = database() and table_name = ${t.table}
          order by ordinal_position`.execute(t.db)
      expect(rows.map((r) => [r.name, r.type, r.nullable])).toEqual([
        ['id', 'varbinary(255)', 'NO'],
        ['owner', 'varchar(64)', 'NO'],
        ['claimed_at', 'bigint(20)', 'NO'],
        ['confirmed', 'tinyint(1)', 'NO'],
        ['confirmed_at', 'bigint(20)', 'YES'],
      ])
      const indexes = await sql<{ name: string }>`
          select index_name as name from information_schema.statistics
          where table_schema = database() and table_name = ${t.table}`.execute(t.db)
      expect(indexes.rows.map((r) => r.name)).toContain(`${t.table}_claimed_at_idx`)
    })

    it('rejects a claim that a BEFORE INSERT trigger refuses, instead of calling it taken', async () => {
      await sql
        .raw(
          `create trigger ${t.table}_refuse before insert on ${t.table} for each row signal sqlstate '45000' set message_text = 'disk on fire'`,
        )
        .execute(t.db)
      await expect(t.store().tryClaim('m-1')).rejects.toThrow('disk on fire')
    })

    it('keeps ids that differ only in case, accents or trailing spaces apart, byte for byte', async () => {
      const ids = ['order-1', 'ORDER-1', 'order-1 ', 'café', 'cafe\u0301', 'zamówienie-🚀-注文']
      const s = t.store()
      for (const id of ids) expect(await s.tryClaim(id)).toBe('claimed')
      for (const id of ids) await s.confirm(id)
      for (const id of ids) expect(await t.store().tryClaim(id)).toBe('duplicate')
      expect(await t.count()).toBe(ids.length)
      const { rows } = await sql<{ bytes: number | string }>`
          select octet_length(id) as bytes from ${sql.table(t.table)}
          where id = ${'zamówienie-🚀-注文'}`.execute(t.db)
      expect(rows.map((r) => Number(r.bytes))).toEqual([Buffer.byteLength('zamówienie-🚀-注文')])
    })

    it('takes the longest id the store accepts (255 bytes of UTF-8)', async () => {
      const id = '🚀'.repeat(63) + 'abc'
      expect(Buffer.byteLength(id)).toBe(255)
      const s = t.store()
      expect(await s.tryClaim(id)).toBe('claimed')
      await s.confirm(id)
      expect(await t.store().tryClaim(id)).toBe('duplicate')
    })
  },
)
