import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { archiveStoreConformance } from '@acemq/testing'
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
