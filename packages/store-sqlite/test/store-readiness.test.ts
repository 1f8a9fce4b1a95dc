import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { familyTableScenarios, storeReadinessScenarios } from '@acemq/testing'
import { SqliteIdempotencyStore } from '../src/index.js'

storeReadinessScenarios('SqliteIdempotencyStore', {
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-ready-'))
    const db = new Database(join(dir, 'idempotency.db'))
    const store = new SqliteIdempotencyStore(db, { table: 'orders_seen' })
    return {
      store,
      async createTable() {
        db.exec(store.createTableSql())
      },
      async cleanup() {
        await store.close()
        db.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

familyTableScenarios('SqliteIdempotencyStore', {
  dialect: 'sqlite',
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-family-'))
    const db = new Database(join(dir, 'idempotency.db'))
    const stores: SqliteIdempotencyStore[] = []
    return {
      execute: async (statement) => void db.exec(statement),
      store(table) {
        const store = new SqliteIdempotencyStore(db, { table })
        stores.push(store)
        return store
      },
      async cleanup() {
        await Promise.all(stores.map((store) => store.close()))
        db.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})
