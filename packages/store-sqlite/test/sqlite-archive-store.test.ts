import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ArchivedMessage } from '@acemq/core/spi'
import { archiveStoreConformance } from '@acemq/testing'
import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { SqliteArchiveStore } from '../src/index.js'

archiveStoreConformance('SqliteArchiveStore', {
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-archive-'))
    const store = new SqliteArchiveStore(join(dir, 'archive.db'))
    return {
      store,
      async cleanup() {
        store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

// A table named with a schema (an attached database): SQLite wants the schema on the index's
// name and the table alone after ON, or the DDL fails (`CREATE INDEX … ON "ops"."dead"`).
describe('SqliteArchiveStore in an attached schema', () => {
  it('creates its tables and their indexes in that schema, twice over, and archives there', async () => {
    const db = new Database(':memory:')
    try {
      db.exec(`ATTACH DATABASE ':memory:' AS ops`)
      const ddl = SqliteArchiveStore.createTableSql({ table: 'ops.dead' })
      db.exec(ddl)
      db.exec(ddl)
      const objects = db
        .prepare(`SELECT type, name, tbl_name AS tbl FROM ops.sqlite_master ORDER BY name`)
        .all() as { type: string; name: string; tbl: string }[]
      expect(objects.filter((o) => o.type === 'table').map((o) => o.name)).toEqual([
        'dead',
        'dead_audit',
      ])
      const indexes = objects.filter((o) => o.type === 'index' && !o.name.startsWith('sqlite_'))
      expect(indexes.length).toBeGreaterThan(0)
      for (const index of indexes) expect(['dead', 'dead_audit']).toContain(index.tbl)
      expect(db.prepare(`SELECT count(*) AS n FROM main.sqlite_master`).get()).toEqual({ n: 0 })

      const store = new SqliteArchiveStore(db, { table: 'ops.dead' })
      expect(await store.add(archived('a-1'))).toBe(true)
      expect((await store.get('a-1'))?.id).toBe('a-1')
      expect(db.prepare(`SELECT count(*) AS n FROM ops.dead`).get()).toEqual({ n: 1 })
    } finally {
      db.close()
    }
  })
})

function archived(id: string): ArchivedMessage {
  return {
    id,
    key: `key-${id}`,
    queue: 'orders.dlq',
    messageId: id,
    messageType: 'order',
    reason: 'handler failed',
    attempt: 1,
    firstSeen: undefined,
    archivedAt: 1_700_000_000_000,
    correlationId: '',
    traceparent: undefined,
    exchange: '',
    routingKey: 'orders',
    body: new TextEncoder().encode('{}'),
    headers: '{}',
    properties: '{}',
    status: 'archived',
    statusAt: undefined,
    statusBy: undefined,
    replayedTo: undefined,
  }
}
