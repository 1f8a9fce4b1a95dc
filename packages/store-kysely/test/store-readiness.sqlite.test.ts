import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { familyTableScenarios, storeReadinessScenarios } from '@acemq/testing'
import { idempotencyMigration, KyselyIdempotencyStore } from '../src/index.js'
import { sqlite } from './support/databases.js'
import { familyTableFixture } from './support/server-store-suite.js'

storeReadinessScenarios('KyselyIdempotencyStore on SQLite', {
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-kysely-ready-'))
    const db = sqlite(join(dir, 'idempotency.db'))
    const store = new KyselyIdempotencyStore(db, { table: 'orders_seen' })
    return {
      store,
      async createTable() {
        await idempotencyMigration({ table: 'orders_seen' }).up(db)
      },
      async cleanup() {
        await store.close()
        await db.destroy()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

familyTableScenarios('KyselyIdempotencyStore on SQLite', {
  dialect: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-kysely-family-'))
    return familyTableFixture(sqlite(join(dir, 'idempotency.db')), () =>
      rmSync(dir, { recursive: true, force: true }),
    )
  },
})
