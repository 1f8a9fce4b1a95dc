import { describe } from 'vitest'
import { requirePostgres } from '@acemq/testing'
import { postgres } from './support/databases.js'
import { kyselyArchiveSuite } from './support/archive-suite.js'

describe.runIf(await requirePostgres())('the Kysely dead-letter archive on Postgres', () => {
  kyselyArchiveSuite('Postgres', () => postgres({ max: 2 }))
})
