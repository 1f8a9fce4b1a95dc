import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqlite } from './support/databases.js'
import { kyselyOutboxSuite } from './support/outbox-suite.js'

// One file for the run: every test makes its own tables in it, each open() is a connection of
// its own (as another process's would be).
const path = join(mkdtempSync(join(tmpdir(), 'acemq-kysely-outbox-')), 'outbox.db')

kyselyOutboxSuite({ name: 'SQLite', dialect: 'sqlite', open: () => sqlite(path) })
