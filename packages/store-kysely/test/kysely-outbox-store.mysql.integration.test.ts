import { describe } from 'vitest'
import { requireMysql } from '@acemq/testing'
import { mysql } from './support/databases.js'
import { kyselyOutboxSuite } from './support/outbox-suite.js'

describe.runIf(await requireMysql())('the Kysely outbox store on MariaDB', () => {
  kyselyOutboxSuite({ name: 'MariaDB', dialect: 'mysql', open: () => mysql({ max: 4 }) })
})
