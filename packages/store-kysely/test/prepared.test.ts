import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type CompiledQuery,
  type DatabaseConnection,
} from 'kysely'
import { describe, expect, it } from 'vitest'
import { prepare } from '../src/internal/prepared.js'

function recording(): { db: Kysely<object>; seen: CompiledQuery[] } {
  const seen: CompiledQuery[] = []
  const connection: DatabaseConnection = {
    async executeQuery(query) {
      seen.push(query)
      return { rows: [], numAffectedRows: 1n }
    },
    // eslint-disable-next-line require-yield
    async *streamQuery() {
      throw new Error('not streamed')
    },
  }
  class RecordingDriver extends DummyDriver {
    override async acquireConnection(): Promise<DatabaseConnection> {
      return connection
    }
  }
  const db = new Kysely<object>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new RecordingDriver(),
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  })
  return { db, seen }
}

describe('prepare', () => {
  it('compiles once and binds each run in placeholder order, a repeated slot every time it appears', async () => {
    const { db, seen } = recording()
    const run = prepare(
      db.getExecutor(),
      ['id', 'now'],
      ($) => sql`update ${sql.table('t')} set at = ${$.now} where id = ${$.id} and at < ${$.now}`,
    )
    await run({ id: 'a', now: 1 })
    await run({ now: 2, id: 'b' })
    expect(seen.map((q) => q.sql)).toEqual([
      'update "t" set at = $1 where id = $2 and at < $3',
      'update "t" set at = $1 where id = $2 and at < $3',
    ])
    expect(seen.map((q) => q.parameters)).toEqual([
      [1, 'a', 1],
      [2, 'b', 2],
    ])
  })

  it('refuses a value that is not a slot, which every run would otherwise repeat', () => {
    const { db } = recording()
    expect(() =>
      prepare(db.getExecutor(), ['id'], ($) => sql`select 1 where id = ${$.id} and n = ${42}`),
    ).toThrow(/fixed parameter/)
  })
})
