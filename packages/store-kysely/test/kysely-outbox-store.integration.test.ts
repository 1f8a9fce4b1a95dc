import { describe } from 'vitest'
import { requirePostgres } from '@acemq/testing'
import { postgres } from './support/databases.js'
import { kyselyOutboxSuite } from './support/outbox-suite.js'

describe.runIf(await requirePostgres())('the Kysely outbox store on Postgres', () => {
  kyselyOutboxSuite({ name: 'Postgres', dialect: 'postgres', open: () => postgres({ max: 4 }) })
})
