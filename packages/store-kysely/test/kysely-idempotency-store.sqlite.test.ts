import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Migrator, sql, type Kysely } from 'kysely'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { idempotencyStoreConformance } from '@acemq/testing'
import {
  createTableSql,
  idempotencyMigration,
  KyselyIdempotencyStore,
  type KyselyIdempotencyStoreOptions,
} from '../src/index.js'
import { sqlite, type AppDatabase } from './support/databases.js'

idempotencyStoreConformance('KyselyIdempotencyStore on SQLite', {
  async create({ claimTimeoutMs, retentionMs, now }) {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-kysely-sqlite-'))
    const path = join(dir, 'idempotency.db')
    const db = sqlite(path)
    await idempotencyMigration().up(db)
    const options: KyselyIdempotencyStoreOptions = {
      claimTimeout: claimTimeoutMs,
      retention: retentionMs,
      now,
    }
    // Each further instance has its own connection to the file, as another process would.
    const others: Kysely<AppDatabase>[] = []
    return {
      store: new KyselyIdempotencyStore(db, options),
      async second() {
        const other = sqlite(path)
        others.push(other)
        return new KyselyIdempotencyStore(other, options)
      },
      async cleanup() {
        for (const other of others) await other.destroy()
        await db.destroy()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

describe('KyselyIdempotencyStore on SQLite', () => {
  let dir: string
  let db: Kysely<AppDatabase>

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'acemq-kysely-sqlite-'))
    db = sqlite(join(dir, 'idempotency.db'))
  })

  afterEach(async () => {
    await db.destroy()
    rmSync(dir, { recursive: true, force: true })
  })

  it('tells the dialect from the adapter and writes SQLite DDL', () => {
    const store = new KyselyIdempotencyStore(db)
    expect(store.dialect).toBe('sqlite')
    expect(store.createTableSql()).toBe(createTableSql({ dialect: 'sqlite' }))
  })

  it('creates its table from createTableSql() statement by statement, twice without harm', async () => {
    for (let i = 0; i < 2; i++) {
      for (const statement of createTableSql({ dialect: 'sqlite' })
        .split(';')
        .map((s) => s.trim())) {
        if (statement !== '') await sql.raw(statement).execute(db)
      }
    }
    const { rows } = await sql<{ name: string; type: string }>`
      select name, type from pragma_table_info('acemq_idempotency')`.execute(db)
    expect(rows.map((r) => `${r.name} ${r.type}`)).toEqual([
      'id TEXT',
      'owner TEXT',
      'claimed_at INTEGER',
      'confirmed INTEGER',
      'confirmed_at INTEGER',
    ])
    expect(await new KyselyIdempotencyStore(db).tryClaim('m-1')).toBe('claimed')
  })

  it('creates and drops the table through a Kysely Migrator', async () => {
    const migrator = new Migrator({
      db,
      provider: {
        getMigrations: async () => ({ '0001_acemq': idempotencyMigration({ table: 'seen' }) }),
      },
    })
    expect((await migrator.migrateToLatest()).error).toBeUndefined()
    expect(await new KyselyIdempotencyStore(db, { table: 'seen' }).tryClaim('m-1')).toBe('claimed')
    expect((await migrator.migrateDown()).error).toBeUndefined()
    await expect(
      new KyselyIdempotencyStore(db, { table: 'seen' }).tryClaim('m-2'),
    ).rejects.toMatchObject({ code: 'ACEMQ_STORE_TABLE_MISSING' })
  })

  it("judges leases by the process's clock when no now option is given: SQLite has no server clock", async () => {
    await idempotencyMigration().up(db)
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      const a = new KyselyIdempotencyStore(db, { claimTimeout: '1m' })
      const b = new KyselyIdempotencyStore(db, { claimTimeout: '1m' })
      expect(await a.tryClaim('m-1')).toBe('claimed')
      vi.setSystemTime(Date.now() + 60_001)
      expect(await b.tryClaim('m-1')).toBe('claimed')
    } finally {
      vi.useRealTimers()
    }
  })

  it('rejects a claim that a trigger refuses, instead of calling it taken', async () => {
    await idempotencyMigration().up(db)
    await sql`create trigger refuse before insert on acemq_idempotency begin select raise(abort, 'disk on fire'); end`.execute(
      db,
    )
    await expect(new KyselyIdempotencyStore(db).tryClaim('m-1')).rejects.toThrow('disk on fire')
  })
})
