import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { ReadinessStore } from './store-readiness.js'

/** The SQL a store's database speaks, for the tables these scenarios create. */
export type FamilyTableDialect = 'postgres' | 'mysql' | 'sqlite'

/** A database to create tables in, and stores on them. */
export interface FamilyTableFixture {
  /** Runs one DDL statement on the store's database. */
  execute(statement: string): Promise<void>
  /** A store on `table`, which exists by then. */
  store(table: string): ReadinessStore
  cleanup(): Promise<void>
}

type ColumnType = 'text' | 'timestamp' | 'bigint' | 'boolean'

const TYPES: Readonly<Record<FamilyTableDialect, Readonly<Record<ColumnType, string>>>> = {
  postgres: {
    text: 'varchar(255)',
    timestamp: 'timestamptz',
    bigint: 'bigint',
    boolean: 'boolean',
  },
  mysql: { text: 'varchar(255)', timestamp: 'datetime(3)', bigint: 'bigint', boolean: 'boolean' },
  sqlite: { text: 'TEXT', timestamp: 'TIMESTAMP', bigint: 'BIGINT', boolean: 'BOOLEAN' },
}

/**
 * The tables the other AceMQ libraries create under the same default name,
 * `acemq_idempotency`: the first column is the primary key.
 */
const LAYOUTS: readonly {
  readonly library: string
  /** What the error must say to name the library. */
  readonly named: RegExp
  readonly columns: readonly (readonly [string, ColumnType])[]
}[] = [
  {
    library: 'Java / Ruby',
    named: /Java \/ Ruby AceMQ library/,
    columns: [
      ['message_id', 'text'],
      ['state', 'text'],
      ['claimed_by', 'text'],
      ['recorded_at', 'timestamp'],
      ['expires_at', 'timestamp'],
    ],
  },
  {
    library: 'Python',
    named: /Python AceMQ library/,
    columns: [
      ['message_id', 'text'],
      ['state', 'text'],
      ['claimed_by', 'text'],
      ['recorded_at', 'bigint'],
      ['expires_at', 'bigint'],
    ],
  },
  {
    library: '.NET',
    named: /\.NET AceMQ library/,
    columns: [
      ['message_id', 'text'],
      ['claimed_at', 'timestamp'],
      ['confirmed', 'boolean'],
    ],
  },
  {
    library: 'Go',
    named: /Go AceMQ library/,
    columns: [
      ['key', 'text'],
      ['handled_at', 'timestamp'],
      ['confirmed', 'boolean'],
    ],
  },
]

function quote(dialect: FamilyTableDialect, identifier: string): string {
  return dialect === 'mysql' ? `\`${identifier}\`` : `"${identifier}"`
}

function createTable(
  dialect: FamilyTableDialect,
  table: string,
  columns: readonly (readonly [string, ColumnType])[],
): string {
  const defined = columns.map(
    ([name, type], i) =>
      `${quote(dialect, name)} ${TYPES[dialect][type]}${i === 0 ? ' NOT NULL PRIMARY KEY' : ''}`,
  )
  return `CREATE TABLE ${quote(dialect, table)} (${defined.join(', ')})`
}

/**
 * What every SQL idempotency store does when a table of its name already exists with another
 * AceMQ library's columns (every library defaults to `acemq_idempotency`, and
 * `CREATE TABLE IF NOT EXISTS` keeps the first one's): `verify()`, a claim and the health
 * contributor say which library's layout the table has and that this store needs a table of its
 * own, with `ACEMQ_STORE_TABLE_MISSING` — never only the database's "column does not exist".
 */
export function familyTableScenarios(
  name: string,
  target: { readonly dialect: FamilyTableDialect; create(): Promise<FamilyTableFixture> },
): void {
  describe(`${name}: another AceMQ library's table of the same name`, () => {
    let fixture: FamilyTableFixture
    let table: string

    beforeEach(async () => {
      fixture = await target.create()
      table = `acemq_family_${Math.random().toString(36).slice(2, 10)}`
    })

    afterEach(async () => {
      try {
        await fixture.execute(`DROP TABLE IF EXISTS ${quote(target.dialect, table)}`)
      } finally {
        await fixture.cleanup()
      }
    })

    for (const layout of LAYOUTS) {
      it(`verify() names the ${layout.library} layout and the remedy, a table of its own`, async () => {
        await fixture.execute(createTable(target.dialect, table, layout.columns))
        const store = fixture.store(table)
        const error: unknown = await store.verify().then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error).toMatchObject({ code: 'ACEMQ_STORE_TABLE_MISSING' })
        const message = (error as Error).message
        expect(message).toMatch(layout.named)
        expect(message).toContain(table)
        expect(message).toContain(`{ table: '${table}_ts' }`)
      })
    }

    it('a claim on the Go layout says the same, and the health contributor reports it', async () => {
      const go = LAYOUTS.find((layout) => layout.library === 'Go')
      await fixture.execute(createTable(target.dialect, table, go?.columns ?? []))
      const store = fixture.store(table)
      await expect(store.tryClaim('m-1')).rejects.toMatchObject({
        code: 'ACEMQ_STORE_TABLE_MISSING',
        message: expect.stringMatching(/Go AceMQ library/),
      })
      const report = await store.healthContributor().report()
      expect(report).toMatchObject({
        status: 'DEGRADED',
        details: { code: 'ACEMQ_STORE_TABLE_MISSING' },
      })
      expect(report.details['error']).toMatch(/Go AceMQ library/)
    })

    it('a table of no known layout names the columns it has and the ones the store needs', async () => {
      await fixture.execute(
        createTable(target.dialect, table, [
          ['id', 'text'],
          ['seen_at', 'timestamp'],
        ]),
      )
      await expect(fixture.store(table).verify()).rejects.toMatchObject({
        code: 'ACEMQ_STORE_TABLE_MISSING',
        message: expect.stringMatching(
          /without the columns this store uses \(id, owner, claimed_at, confirmed, confirmed_at\); it has id, seen_at/,
        ),
      })
    })
  })
}
