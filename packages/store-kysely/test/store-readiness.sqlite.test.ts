import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { storeReadinessScenarios } from '@acemq/testing'
import { idempotencyMigration, KyselyIdempotencyStore } from '../src/index.js'
import { sqlite } from './support/databases.js'

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
