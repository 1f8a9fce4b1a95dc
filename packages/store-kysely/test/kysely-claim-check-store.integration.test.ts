import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql, type Kysely } from 'kysely'
import { describe, expect, it } from 'vitest'
import { claimCheckStoreConformance, requireMysql, requirePostgres } from '@acemq/testing'
import {
  KyselyClaimCheckStore,
  createClaimCheckTableSql,
  type IdempotencyDialect,
} from '../src/index.js'
import { mysql, postgres, sqlite, uniqueTable, type AppDatabase } from './support/databases.js'

/** Where one fixture's databases come from: `open` may be called again for a second instance. */
interface Backing {
  open(): Kysely<AppDatabase>
  cleanup(): Promise<void>
}

function suite(name: string, dialect: IdempotencyDialect, backing: () => Promise<Backing>): void {
  claimCheckStoreConformance(`KyselyClaimCheckStore (${name})`, {
    async create() {
      const { open, cleanup } = await backing()
      const db = open()
      const table = uniqueTable('acemq_claims')
      for (const statement of createClaimCheckTableSql({ table, dialect }).split(';\n')) {
        if (statement.trim() !== '') await sql.raw(statement).execute(db)
      }
      const others: Kysely<AppDatabase>[] = []
      return {
        store: new KyselyClaimCheckStore(db, { table }),
        async second() {
          const other = open()
          others.push(other)
          return new KyselyClaimCheckStore(other, { table })
        },
        async cleanup() {
          for (const other of others) await other.destroy()
          await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db)
          await db.destroy()
          await cleanup()
        },
      }
    },
  })
}

const nothing = async (): Promise<void> => undefined

describe.runIf(await requirePostgres())('the Kysely claim-check store on Postgres', () => {
  suite('Postgres', 'postgres', async () => ({
    open: () => postgres({ max: 2 }),
    cleanup: nothing,
  }))
})

describe.runIf(await requireMysql())('the Kysely claim-check store on MariaDB', () => {
  suite('MariaDB', 'mysql', async () => ({ open: () => mysql({ max: 2 }), cleanup: nothing }))
})

describe('the Kysely claim-check store on SQLite', () => {
  suite('SQLite', 'sqlite', async () => {
    const directory = await mkdtemp(path.join(tmpdir(), 'acemq-claims-'))
    return {
      open: () => sqlite(path.join(directory, 'claims.db')),
      cleanup: () => rm(directory, { recursive: true, force: true }),
    }
  })

  it('writes a table name it cannot quote as a clear error, naming the option', () => {
    expect(() => createClaimCheckTableSql({ table: 'bad name' })).toThrow(
      /table must be an SQL identifier/,
    )
  })
})
