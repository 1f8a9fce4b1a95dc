import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqlite } from './support/databases.js'
import { kyselyArchiveSuite } from './support/archive-suite.js'

// One file for the run; every test makes tables of its own in it.
const path = join(mkdtempSync(join(tmpdir(), 'acemq-kysely-archive-')), 'archive.db')

kyselyArchiveSuite('SQLite', () => sqlite(path))
