import { sql, type Kysely } from 'kysely'
import { archiveStoreConformance } from '@acemq/testing'
import { KyselyArchiveStore } from '../../src/index.js'
import { uniqueTable, type AppDatabase } from './databases.js'

/** The archive store's conformance suite on one database, each test on tables of its own. */
export function kyselyArchiveSuite(name: string, open: () => Kysely<AppDatabase>): void {
  archiveStoreConformance(`KyselyArchiveStore on ${name}`, {
    async create() {
      const db = open()
      const table = uniqueTable('acemq_dl')
      const store = new KyselyArchiveStore(db, { table })
      await store.createTables()
      return {
        store,
        async cleanup() {
          for (const t of [`${table}_audit`, table]) {
            await sql`DROP TABLE IF EXISTS ${sql.table(t)}`.execute(db)
          }
          await db.destroy()
        },
      }
    },
  })
}
