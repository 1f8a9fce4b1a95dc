import { describe } from 'vitest'
import { requireMysql } from '@acemq/testing'
import { mysql } from './support/databases.js'
import { kyselyArchiveSuite } from './support/archive-suite.js'

describe.runIf(await requireMysql())('the Kysely dead-letter archive on MariaDB', () => {
  kyselyArchiveSuite('MariaDB', () => mysql({ max: 2 }))
})
