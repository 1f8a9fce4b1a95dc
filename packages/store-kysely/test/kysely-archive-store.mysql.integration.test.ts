import { sql } from 'kysely'
import { describe, expect, it } from 'vitest'
import { requireMysql } from '@acemq/testing'
import { KyselyArchiveStore } from '../src/index.js'
import { mysql, uniqueTable } from './support/databases.js'
import { kyselyArchiveSuite } from './support/archive-suite.js'

describe.runIf(await requireMysql())('the Kysely dead-letter archive on MariaDB', () => {
  kyselyArchiveSuite('MariaDB', () => mysql({ max: 2 }))

  // archiveTableStatements promises a migration may run them twice: MySQL has no
  // `CREATE INDEX IF NOT EXISTS`, so the indexes are declared inside the tables there.
  it('creates its tables a second time without an error, as a migration run again does', async () => {
    const db = mysql({ max: 1 })
    const table = uniqueTable('acemq_dl')
    try {
      const store = new KyselyArchiveStore(db, { table })
      await store.createTables()
      await expect(store.createTables()).resolves.toBeUndefined()
      const indexes = await sql<{ Key_name: string }>`SHOW INDEX FROM ${sql.table(table)}`.execute(
        db,
      )
      expect(new Set(indexes.rows.map((row) => row.Key_name))).toEqual(
        new Set(['PRIMARY', 'archive_key', `${table}_archived_idx`, `${table}_queue_idx`]),
      )
    } finally {
      for (const t of [`${table}_audit`, table])
        await sql`DROP TABLE IF EXISTS ${sql.table(t)}`.execute(db)
      await db.destroy()
    }
  })
})
