import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { sql, type Kysely, type KyselyPlugin } from 'kysely'
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

/** An application's plugin that renames every result column: the store must not read through it. */
const upperCaseColumns: KyselyPlugin = {
  transformQuery: (args) => args.node,
  transformResult: async ({ result }) => ({
    ...result,
    rows: result.rows.map((row) =>
      Object.fromEntries(Object.entries(row).map(([k, v]) => [k.toUpperCase(), v])),
    ),
  }),
}

describe.runIf(await requirePostgres())('the Kysely claim-check store on Postgres', () => {
  suite('Postgres', 'postgres', async () => ({
    open: () => postgres({ max: 2 }),
    cleanup: nothing,
  }))

  it("runs its own SQL without the instance's plugins, which would rename its columns", async () => {
    const db = postgres({ max: 1 })
    const table = uniqueTable('acemq_claims')
    const plugged = postgres({
      max: 1,
      plugins: [upperCaseColumns],
    })
    try {
      for (const statement of createClaimCheckTableSql({ table }).split(';\n')) {
        if (statement.trim() !== '') await sql.raw(statement).execute(db)
      }
      const store = new KyselyClaimCheckStore(plugged, { table })
      await store.put('k-1', Buffer.from('body'), Date.now() + 60_000)
      expect(Buffer.from((await store.get('k-1')) as Uint8Array).toString()).toBe('body')
      expect(await store.purgeExpired(Date.now() + 120_000)).toBe(1)
    } finally {
      await sql.raw(`DROP TABLE IF EXISTS ${table}`).execute(db)
      await plugged.destroy()
      await db.destroy()
    }
  })
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
