import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  DummyDriver,
  Kysely,
  MysqlAdapter,
  MysqlIntrospector,
  MysqlQueryCompiler,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type DialectAdapter,
  type QueryCompiler,
  type QueryResult,
} from 'kysely'
import { describe, expect, it } from 'vitest'
import { idempotencyMigration, KyselyIdempotencyStore } from '../src/index.js'
import { sqlite, type AppDatabase } from './support/databases.js'

// What the store does when the database answers oddly: every unknown is an error named after
// the statement, a row that keeps changing is given up on after five rounds, purges never
// overlap (found by mutation testing, docs/mutation.md). A scripted connection answers.

type Answer = (query: CompiledQuery) => QueryResult<unknown> | Promise<QueryResult<unknown>>

function scripted(
  adapter: DialectAdapter,
  compiler: () => QueryCompiler,
  answer: Answer,
  seen: string[],
): Kysely<AppDatabase> {
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      seen.push(query.sql)
      return (await answer(query)) as QueryResult<R>
    },
    // eslint-disable-next-line require-yield
    async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
      throw new Error('not streamed')
    },
  }
  class ScriptedDriver extends DummyDriver {
    override async acquireConnection(): Promise<DatabaseConnection> {
      return connection
    }
  }
  return new Kysely<AppDatabase>({
    dialect: {
      createAdapter: () => adapter,
      createDriver: () => new ScriptedDriver(),
      createIntrospector: (db) =>
        adapter instanceof MysqlAdapter ? new MysqlIntrospector(db) : new PostgresIntrospector(db),
      createQueryCompiler: compiler,
    },
  })
}

const NOW = 1_900_000_000_000
const OPTIONS = { now: () => NOW, purgeEvery: 0, claimTimeout: 60_000, retention: 3_600_000 }

function postgres(answer: Answer, seen: string[] = []): KyselyIdempotencyStore {
  return new KyselyIdempotencyStore(
    scripted(new PostgresAdapter(), () => new PostgresQueryCompiler(), answer, seen),
    OPTIONS,
  )
}

function mysql(answer: Answer, seen: string[] = []): KyselyIdempotencyStore {
  return new KyselyIdempotencyStore(
    scripted(new MysqlAdapter(), () => new MysqlQueryCompiler(), answer, seen),
    OPTIONS,
  )
}

const row = (fields: Record<string, unknown>): QueryResult<unknown> => ({
  rows: [{ owner: 'other', confirmed: false, confirmed_at: null, now_ms: NOW, ...fields }],
})
const changed = (n: number): QueryResult<unknown> => ({ rows: [], numAffectedRows: BigInt(n) })
const unknown = (what: string): string =>
  `the database did not report how many rows the idempotency ${what} affected; refusing to guess`

describe('an affected-row count the driver does not report', () => {
  it.each([
    ['claim', (q: CompiledQuery) => (q.sql.startsWith('insert') ? { rows: [] } : changed(1))],
    [
      'take over',
      (q: CompiledQuery) =>
        q.sql.startsWith('insert')
          ? changed(0)
          : q.sql.startsWith('select')
            ? row({ claimed_at: NOW - 60_001 })
            : { rows: [] },
    ],
    [
      'reclaim',
      (q: CompiledQuery) =>
        q.sql.startsWith('insert')
          ? changed(0)
          : q.sql.startsWith('select')
            ? row({ claimed_at: 1, confirmed: true, confirmed_at: NOW - 3_600_001 })
            : { rows: [] },
    ],
  ])('is refused on a %s, naming it', async (what, answer) => {
    await expect(postgres(answer).tryClaim('m-1')).rejects.toThrow(unknown(what))
  })

  it('is refused on MySQL’s claim, on a confirm and on a purge, naming each', async () => {
    await expect(mysql(() => ({ rows: [] })).tryClaim('m-1')).rejects.toThrow(unknown('claim'))
    await expect(postgres(() => ({ rows: [] })).confirm('m-1')).rejects.toThrow(unknown('confirm'))
    await expect(postgres(() => ({ rows: [] })).purgeExpired()).rejects.toThrow(unknown('purge'))
  })
})

describe('rows that are not what the store wrote', () => {
  it.each([
    ['claimed_at', { claimed_at: 'soon' }],
    ['the clock', { claimed_at: NOW, now_ms: 'later' }],
    ['confirmed_at', { claimed_at: NOW, confirmed: true, confirmed_at: 'yesterday' }],
  ])('are refused, naming %s', async (column, fields) => {
    const store = postgres((q) => (q.sql.startsWith('insert') ? changed(0) : row(fields)))
    await expect(store.tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_RESULT_UNKNOWN',
      message: expect.stringContaining(`for ${column}, not a number`),
    })
  })

  it.each([
    ['null', null],
    ['missing', undefined],
  ])(
    'count a confirmed row whose confirmed_at is %s as confirmed when it was claimed',
    async (_what, confirmedAt) => {
      const store = postgres((q) =>
        q.sql.startsWith('insert')
          ? changed(0)
          : row({ claimed_at: NOW - 10, confirmed: true, confirmed_at: confirmedAt }),
      )
      expect(await store.tryClaim('m-1')).toBe('duplicate')
    },
  )

  it('judge a confirmed row by confirmed_at, not by when it was claimed', async () => {
    const store = postgres((q) =>
      q.sql.startsWith('insert')
        ? changed(0)
        : row({ claimed_at: NOW - 7_200_000, confirmed: true, confirmed_at: NOW - 10 }),
    )
    expect(await store.tryClaim('m-1')).toBe('duplicate')
  })
})

describe('a row that keeps changing under the store', () => {
  it('is given up on after five rounds, saying so', async () => {
    const seen: string[] = []
    const store = postgres(
      (q) =>
        q.sql.startsWith('insert')
          ? changed(0)
          : q.sql.startsWith('select')
            ? row({ claimed_at: NOW - 60_001 })
            : changed(0),
      seen,
    )
    await expect(store.tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_CONTENDED',
      message: 'the claim on "m-1" kept changing under this store for 5 rounds; not guessing',
    })
    expect(seen.filter((sql) => sql.startsWith('insert'))).toHaveLength(5)
  })

  it('looks again after a reclaim someone else won, and sees the new confirmation', async () => {
    let reads = 0
    const store = postgres((q) => {
      if (q.sql.startsWith('insert')) return changed(0)
      if (q.sql.startsWith('select')) {
        reads++
        return reads === 1
          ? row({ claimed_at: 1, confirmed: true, confirmed_at: NOW - 3_600_001 })
          : row({ claimed_at: NOW - 5, confirmed: true, confirmed_at: NOW - 5 })
      }
      return changed(0)
    })
    expect(await store.tryClaim('m-1')).toBe('duplicate')
  })
})

describe('errors', () => {
  it('only MySQL reads a duplicate-key error as "taken"', async () => {
    const duplicate = Object.assign(new Error('duplicate'), { errno: 1062, code: 'ER_DUP_ENTRY' })
    const store = postgres((q) => {
      if (q.sql.startsWith('insert')) throw duplicate
      return row({ claimed_at: NOW - 5 })
    })
    await expect(store.tryClaim('m-1')).rejects.toBe(duplicate)
  })

  it.each([
    ['an errno of 1062 alone', { errno: 1062 }],
    ['a code of ER_DUP_ENTRY alone', { code: 'ER_DUP_ENTRY' }],
  ])('MySQL reads %s as a duplicate key', async (_what, fields) => {
    const store = mysql((q) => {
      if (q.sql.startsWith('insert')) throw Object.assign(new Error('duplicate'), fields)
      return row({ claimed_at: NOW - 5 })
    })
    expect(await store.tryClaim('m-1')).toBe('in_progress')
  })

  it('a confirm or a release the database refuses rejects', async () => {
    const store = postgres(() => {
      throw new Error('disk on fire')
    })
    await expect(store.confirm('m-1')).rejects.toThrow('disk on fire')
    await expect(store.release('m-1')).rejects.toThrow('disk on fire')
  })
})

describe('background purges', () => {
  it('never overlap: a claim while one runs starts no second one', async () => {
    const seen: string[] = []
    let finish!: () => void
    const pending = new Promise<QueryResult<unknown>>((resolve) => {
      finish = () => resolve(changed(0))
    })
    const store = new KyselyIdempotencyStore(
      scripted(
        new PostgresAdapter(),
        () => new PostgresQueryCompiler(),
        (q) => (q.sql.startsWith('delete') ? pending : changed(1)),
        seen,
      ),
      { ...OPTIONS, purgeEvery: 1 },
    )
    await store.tryClaim('a')
    await store.tryClaim('b')
    expect(seen.filter((sql) => sql.startsWith('delete'))).toHaveLength(1)
    finish()
    await store.close()
  })

  it('start again once the last one is done', async () => {
    const seen: string[] = []
    const store = new KyselyIdempotencyStore(
      scripted(
        new PostgresAdapter(),
        () => new PostgresQueryCompiler(),
        () => changed(1),
        seen,
      ),
      { ...OPTIONS, purgeEvery: 1 },
    )
    await store.tryClaim('a')
    await new Promise((resolve) => setImmediate(resolve))
    await store.tryClaim('b')
    expect(seen.filter((sql) => sql.startsWith('delete'))).toHaveLength(2)
    await store.close()
  })

  it('never take a claim younger than the claim timeout, even past the retention (SQLite)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-kysely-edges-'))
    const db = sqlite(join(dir, 'idempotency.db'))
    try {
      await idempotencyMigration().up(db)
      let clock = NOW
      const store = (): KyselyIdempotencyStore =>
        new KyselyIdempotencyStore(db, {
          retention: 1_000,
          claimTimeout: 5_000,
          purgeEvery: 0,
          now: () => clock,
        })
      await store().tryClaim('m-1', 'owner-a')
      clock += 2_000
      expect(await store().purgeExpired()).toBe(0)
      expect(await store().tryClaim('m-1', 'owner-b')).toBe('in_progress')
      clock += 3_001
      expect(await store().purgeExpired()).toBe(1)
    } finally {
      await db.destroy()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
