import { Migrator, sql, type Kysely } from 'kysely'
import { describe, expect, it } from 'vitest'
import { OutboxRecord } from '@acemq/core'
import { outboxStoreConformance } from '@acemq/testing'
import {
  createOutboxTableSql,
  KyselyOutboxStore,
  outboxMigration,
  type IdempotencyDialect,
} from '../../src/index.js'
import { uniqueTable, type AppDatabase } from './databases.js'

/** A database the outbox store is tested on, and how to reach it. */
export interface OutboxDatabase {
  readonly name: string
  readonly dialect: IdempotencyDialect
  /** A fresh connection (pool) to the database; `shared` names a SQLite file to share. */
  open(): Kysely<AppDatabase>
  /** Drops what the test made (and for SQLite, deletes the file). */
  dispose?(): Promise<void>
}

async function ordersTable(db: Kysely<AppDatabase>, table: string): Promise<void> {
  await sql`create table ${sql.table(table)} (id varchar(64) primary key, total integer not null)`.execute(
    db,
  )
}

/**
 * The outbox store on one database: the conformance suite, records that commit and roll
 * back with the business rows of the caller's transaction, and migrations.
 */
export function kyselyOutboxSuite(database: OutboxDatabase): void {
  outboxStoreConformance(`KyselyOutboxStore on ${database.name}`, {
    transactional: true,
    async create({ maxAttempts, now }) {
      const db = database.open()
      const table = uniqueTable('acemq_outbox')
      await outboxMigration({ table }).up(db)
      const others: Kysely<AppDatabase>[] = []
      const store = new KyselyOutboxStore(db, { table, maxAttempts, now })
      return {
        store,
        async second() {
          // Its own connection pool, as a second process would have.
          const other = database.open()
          others.push(other)
          return new KyselyOutboxStore(other, { table, maxAttempts, now })
        },
        add: (record) => db.transaction().execute((trx) => store.add(trx, record)),
        async addAndRollBack(record) {
          await db.transaction().execute(async (trx) => {
            await store.add(trx, record)
            throw new Error('roll back')
          })
        },
        async cleanup() {
          for (const other of others) await other.destroy()
          await outboxMigration({ table }).down(db)
          await db.destroy()
        },
      }
    },
  })

  describe(`KyselyOutboxStore on ${database.name}`, () => {
    it('writes the record exactly when the business row commits, in the same transaction', async () => {
      const db = database.open()
      const table = uniqueTable('acemq_outbox')
      const orders = uniqueTable('orders')
      try {
        await outboxMigration({ table }).up(db)
        await ordersTable(db, orders)
        const outbox = new KyselyOutboxStore(db, { table })
        await db.transaction().execute(async (trx) => {
          await sql`insert into ${sql.table(orders)} (id, total) values (${'o-1'}, ${12})`.execute(
            trx,
          )
          await outbox.add(trx, OutboxRecord.of('', 'orders.placed', { id: 'o-1' }, { id: 'o-1' }))
        })
        await expect(
          db.transaction().execute(async (trx) => {
            await sql`insert into ${sql.table(orders)} (id, total) values (${'o-2'}, ${5})`.execute(
              trx,
            )
            await outbox.add(
              trx,
              OutboxRecord.of('', 'orders.placed', { id: 'o-2' }, { id: 'o-2' }),
            )
            throw new Error('payment declined')
          }),
        ).rejects.toThrow('payment declined')
        // A duplicate record fails the whole transaction, business row included.
        await expect(
          db.transaction().execute(async (trx) => {
            await sql`insert into ${sql.table(orders)} (id, total) values (${'o-3'}, ${7})`.execute(
              trx,
            )
            await outbox.add(
              trx,
              OutboxRecord.of('', 'orders.placed', { id: 'o-1' }, { id: 'o-1' }),
            )
          }),
        ).rejects.toThrow()
        const { rows } = await sql<{ id: string }>`select id from ${sql.table(orders)}`.execute(db)
        expect(rows.map((r) => r.id)).toEqual(['o-1'])
        expect((await outbox.claimBatch(10, 30_000)).map((r) => r.id)).toEqual(['o-1'])
        expect(await outbox.pendingCount()).toBe(1)
        await outbox.markPublished('o-1')
        expect(await outbox.purgePublished(0)).toBe(1)
      } finally {
        await sql`drop table if exists ${sql.table(orders)}`.execute(db)
        await outboxMigration({ table }).down(db)
        await db.destroy()
      }
    })

    it('creates and drops the table through a Kysely Migrator, and the DDL runs twice harmlessly', async () => {
      const db = database.open()
      const table = uniqueTable('acemq_outbox')
      try {
        const migrator = new Migrator({
          db,
          migrationTableName: `${table}_migrations`,
          migrationLockTableName: `${table}_lock`,
          provider: { getMigrations: async () => ({ '0001_outbox': outboxMigration({ table }) }) },
        })
        expect((await migrator.migrateToLatest()).error).toBeUndefined()
        const store = new KyselyOutboxStore(db, { table })
        expect(store.dialect).toBe(database.dialect)
        for (const statement of store
          .createTableSql()
          .split(';\n')
          .filter((s) => s.trim())) {
          await sql.raw(statement).execute(db)
        }
        expect(await store.stats()).toMatchObject({ pending: 0, retired: 0 })
        expect((await migrator.migrateDown()).error).toBeUndefined()
        await expect(store.pendingCount()).rejects.toThrow()
        await sql`drop table if exists ${sql.table(`${table}_migrations`)}`.execute(db)
        await sql`drop table if exists ${sql.table(`${table}_lock`)}`.execute(db)
      } finally {
        await db.destroy()
      }
    })

    it('reports a missing outbox table as ACEMQ_STORE_TABLE_MISSING, with the way to create it', async () => {
      const db = database.open()
      try {
        const store = new KyselyOutboxStore(db, { table: uniqueTable('acemq_outbox_never_made') })
        const missing = { code: 'ACEMQ_STORE_TABLE_MISSING', message: /outboxMigration\(\)/ }
        await expect(store.claimBatch(10, 30_000)).rejects.toMatchObject(missing)
        await expect(store.stats()).rejects.toMatchObject(missing)
        await expect(store.verify()).rejects.toMatchObject(missing)
        await expect(store.retired()).rejects.toMatchObject(missing)
        await expect(
          db.transaction().execute((trx) => store.add(trx, OutboxRecord.of('', 'q', {}))),
        ).rejects.toMatchObject(missing)
      } finally {
        await db.destroy()
      }
    })

    it(`writes ${database.dialect} DDL for a schema-qualified table and refuses names that need quoting`, () => {
      expect(createOutboxTableSql({ dialect: database.dialect, table: 'app.outbox' })).toContain(
        database.dialect === 'mysql' ? '`app`.`outbox`' : '"outbox"',
      )
      expect(() => createOutboxTableSql({ table: 'outbox; drop table x' })).toThrow(/identifier/)
    })
  })
}
