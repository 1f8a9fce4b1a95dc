import { Migrator, sql, type Kysely } from 'kysely'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  familyTableScenarios,
  idempotencyStoreConformance,
  storeReadinessScenarios,
  type FamilyTableFixture,
} from '@acemq/testing'
import {
  idempotencyMigration,
  KyselyIdempotencyStore,
  type IdempotencyDialect,
  type KyselyIdempotencyStoreOptions,
} from '../../src/index.js'
import { uniqueTable, type AppDatabase } from './databases.js'

/** A database server the store runs on in the tests, and how to reach it. */
export interface ServerDatabase {
  /** As the test names say it: `Postgres`, `MariaDB`. */
  readonly name: string
  readonly dialect: IdempotencyDialect
  /** A Kysely instance with its own pool of at most `max` connections. */
  open(options?: { readonly max?: number }): Kysely<AppDatabase>
  /** What a claim that breaks a NOT NULL column rejects with (the driver's error). */
  readonly notNullError: object
  /** Whether the server answers (`requirePostgres()` and the like); the suite is skipped when not. */
  readonly available: boolean
}

/** The table a test uses, with the clock its stores read. */
export interface ServerTable {
  readonly db: Kysely<AppDatabase>
  readonly table: string
  /** A store on the table whose clock is {@link ServerTable.clock}. */
  store(options?: KyselyIdempotencyStoreOptions): KyselyIdempotencyStore
  clock: number
  count(): Promise<number>
}

async function createTable(db: Kysely<AppDatabase>, table: string): Promise<void> {
  await idempotencyMigration({ table }).up(db)
}

async function dropTable(db: Kysely<AppDatabase>, table: string): Promise<void> {
  await sql`drop table if exists ${sql.table(table)}`.execute(db)
}

/**
 * Stores on tables the family scenarios create in `db`; `cleanup` closes them, destroys `db` and
 * then runs `after`.
 */
export function familyTableFixture(
  db: Kysely<AppDatabase>,
  after: () => void = () => undefined,
): FamilyTableFixture {
  const stores: KyselyIdempotencyStore[] = []
  return {
    execute: async (statement) => void (await sql.raw(statement).execute(db)),
    store(table) {
      const store = new KyselyIdempotencyStore(db, { table })
      stores.push(store)
      return store
    },
    async cleanup() {
      await Promise.all(stores.map((store) => store.close()))
      await db.destroy()
      after()
    },
  }
}

/**
 * What every database server must do for the store: the conformance suite, migrations, real
 * concurrency and purging. `more` adds the server's own tests inside the same fixture.
 */
export function serverStoreSuite(
  server: ServerDatabase,
  more: (t: ServerTable) => void = () => undefined,
): void {
  describe.runIf(server.available)(`on ${server.name}`, () => {
    serverSuite(server, more)
  })
}

function serverSuite(server: ServerDatabase, more: (t: ServerTable) => void): void {
  idempotencyStoreConformance(`KyselyIdempotencyStore on ${server.name}`, {
    async create({ claimTimeoutMs, retentionMs, now }) {
      const db = server.open({ max: 12 })
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

  storeReadinessScenarios(`KyselyIdempotencyStore on ${server.name}`, {
    async create() {
      const db = server.open({ max: 4 })
      const table = uniqueTable()
      const store = new KyselyIdempotencyStore(db, { table })
      return {
        store,
        createTable: () => createTable(db, table),
        async cleanup() {
          await store.close()
          await dropTable(db, table)
          await db.destroy()
        },
      }
    },
  })

  familyTableScenarios(`KyselyIdempotencyStore on ${server.name}`, {
    dialect: server.dialect,
    create: async () => familyTableFixture(server.open({ max: 2 })),
  })

  describe(`KyselyIdempotencyStore on ${server.name}`, () => {
    const t = {
      clock: 0,
      store(options: KyselyIdempotencyStoreOptions = {}) {
        return new KyselyIdempotencyStore(this.db, {
          table: this.table,
          now: () => this.clock,
          ...options,
        })
      },
      async count() {
        const { rows } = await sql<{
          n: number | string
        }>`select count(*) as n from ${sql.table(this.table)}`.execute(this.db)
        return Number(rows[0]?.n)
      },
    } as { -readonly [K in keyof ServerTable]: ServerTable[K] }

    beforeAll(() => {
      t.db = server.open()
    })

    afterAll(async () => {
      await t.db.destroy()
    })

    beforeEach(async () => {
      t.clock = Date.UTC(2030, 0, 1)
      t.table = uniqueTable()
      await createTable(t.db, t.table)
    })

    afterEach(async () => {
      await dropTable(t.db, t.table)
    })

    it('tells the dialect from the adapter', () => {
      expect(t.store().dialect).toBe(server.dialect)
    })

    it('creates and drops the table through a Kysely Migrator', async () => {
      const migrated = uniqueTable()
      const migrator = new Migrator({
        db: t.db,
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
        expect(await t.store({ table: migrated }).tryClaim('m-1')).toBe('claimed')
        const down = await migrator.migrateDown()
        expect(down.error).toBeUndefined()
        const tables = await t.db.introspection.getTables()
        expect(tables.map((table) => table.name)).not.toContain(migrated)
      } finally {
        await dropTable(t.db, migrated)
        await dropTable(t.db, `${migrated}_migrations`)
        await dropTable(t.db, `${migrated}_migrations_lock`)
      }
    })

    it('rejects a claim that violates a NOT NULL constraint, instead of calling it taken', async () => {
      await sql`alter table ${sql.table(t.table)} add column tenant varchar(10) not null`.execute(
        t.db,
      )
      await expect(t.store().tryClaim('m-1')).rejects.toMatchObject(server.notNullError)
    })

    it('confirms twice without error: an upsert that changes nothing is still a confirm', async () => {
      const s = t.store()
      await s.tryClaim('m-1')
      await s.confirm('m-1')
      await s.confirm('m-1')
      expect(await s.isConfirmed('m-1')).toBe(true)
      expect(await t.count()).toBe(1)
    })

    it('gives each of 300 ids to exactly one of 16 stores claiming them all at once', async () => {
      const wide = server.open({ max: 16 })
      try {
        const stores = Array.from(
          { length: 16 },
          () => new KyselyIdempotencyStore(wide, { table: t.table }),
        )
        const ids = Array.from({ length: 300 }, (_, i) => `order-${i}`)
        const results = await Promise.all(
          stores.map(async (s) => {
            const claimed: string[] = []
            for (const id of ids) if ((await s.tryClaim(id)) === 'claimed') claimed.push(id)
            return claimed
          }),
        )
        const all = results.flat()
        expect(all).toHaveLength(ids.length)
        expect(new Set(all).size).toBe(ids.length)
      } finally {
        await wide.destroy()
      }
    })

    it('gives each of 100 stale claims to exactly one of 16 stores taking them over at once', async () => {
      const wide = server.open({ max: 16 })
      try {
        const ids = Array.from({ length: 100 }, (_, i) => `stale-${i}`)
        const crashed = new KyselyIdempotencyStore(wide, {
          table: t.table,
          now: () => t.clock - 600_000,
        })
        for (const id of ids) await crashed.tryClaim(id)
        const stores = Array.from(
          { length: 16 },
          () => new KyselyIdempotencyStore(wide, { table: t.table, now: () => t.clock }),
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
        const seed = t.store({ retention, claimTimeout: 100, purgeEvery: 0 })
        for (let i = 0; i < 250; i++) {
          await seed.tryClaim(`old-${i}`)
          await seed.confirm(`old-${i}`)
        }
        await seed.tryClaim('old-unconfirmed')
        t.clock += 2_000
      })

      it('deletes expired rows in batches of purgeBatchSize and keeps live ones', async () => {
        const s = t.store({ retention, claimTimeout: 100, purgeEvery: 0, purgeBatchSize: 100 })
        await s.tryClaim('live')
        await s.tryClaim('recent')
        await s.confirm('recent')
        expect(await t.count()).toBe(253)
        expect(await s.purgeExpired()).toBe(100)
        expect(await t.count()).toBe(153)
        expect(await s.purgeExpired()).toBe(100)
        expect(await s.purgeExpired()).toBe(51)
        expect(await s.purgeExpired()).toBe(0)
        expect(await t.count()).toBe(2)
        expect(await s.isConfirmed('recent')).toBe(true)
      })

      it('purges one batch in the background on every purgeEvery-th claim, not on every call', async () => {
        const s = t.store({ retention, claimTimeout: 100, purgeEvery: 5, purgeBatchSize: 10 })
        for (let i = 1; i <= 4; i++) await s.tryClaim(`new-${i}`)
        expect(await t.count()).toBe(251 + 4)
        await s.tryClaim('new-5')
        await s.close()
        expect(await t.count()).toBe(251 + 5 - 10)
      })
    })

    describe("on the database's clock (no now option)", () => {
      const HOUR = 3_600_000
      const DAY = 24 * HOUR
      // Another host's store on the same table: the clock it would read is the process's Date.
      const host = (options: KyselyIdempotencyStoreOptions = {}): KyselyIdempotencyStore =>
        new KyselyIdempotencyStore(t.db, { table: t.table, purgeEvery: 0, ...options })
      let real: number

      beforeEach(() => {
        real = Date.now()
        vi.useFakeTimers({ toFake: ['Date'] })
      })

      afterEach(() => {
        vi.useRealTimers()
      })

      it("does not take over a live claim from a host whose clock is behind, however far ahead this host's clock is", async () => {
        vi.setSystemTime(real - HOUR)
        expect(await host({ claimTimeout: '1m' }).tryClaim('m-1')).toBe('claimed')
        vi.setSystemTime(real + HOUR)
        expect(await host({ claimTimeout: '1m' }).tryClaim('m-1')).toBe('in_progress')
      })

      it('keeps a confirmed id a duplicate for the retention, though the confirming host was days behind', async () => {
        vi.setSystemTime(real - 2 * DAY)
        const behind = host({ retention: '1d' })
        await behind.tryClaim('m-1')
        await behind.confirm('m-1')
        vi.setSystemTime(real)
        const other = host({ retention: '1d' })
        expect(await other.isConfirmed('m-1')).toBe(true)
        expect(await other.tryClaim('m-1')).toBe('duplicate')
      })

      it('purges nothing live when the purging host is days ahead', async () => {
        const s = host({ retention: '1d' })
        await s.tryClaim('confirmed')
        await s.confirm('confirmed')
        await s.tryClaim('live')
        vi.setSystemTime(real + 2 * DAY)
        expect(await host({ retention: '1d' }).purgeExpired()).toBe(0)
        expect(await t.count()).toBe(2)
      })

      it('writes claimed_at and confirmed_at from the database clock', async () => {
        vi.setSystemTime(real - DAY)
        const s = host()
        await s.tryClaim('m-1')
        await s.confirm('m-1')
        vi.useRealTimers()
        const { rows } = await sql<{
          claimed_at: string | number
          confirmed_at: string | number
        }>`select claimed_at, confirmed_at from ${sql.table(t.table)}`.execute(t.db)
        for (const at of [rows[0]?.claimed_at, rows[0]?.confirmed_at]) {
          expect(Math.abs(Number(at) - Date.now())).toBeLessThan(60_000)
        }
      })

      it('takes over a claim once it is older than the claim timeout, and forgets a confirmed id after the retention', async () => {
        vi.useRealTimers()
        const a = host({ claimTimeout: 200, retention: 200 })
        const b = host({ claimTimeout: 200, retention: 200 })
        await a.tryClaim('m-1')
        expect(await b.tryClaim('m-1')).toBe('in_progress')
        await a.tryClaim('m-2')
        await a.confirm('m-2')
        expect(await b.tryClaim('m-2')).toBe('duplicate')
        await new Promise((resolve) => setTimeout(resolve, 400))
        expect(await b.tryClaim('m-1')).toBe('claimed')
        expect(await b.isConfirmed('m-2')).toBe(false)
        expect(await b.tryClaim('m-2')).toBe('claimed')
      })
    })

    more(t)
  })
}
