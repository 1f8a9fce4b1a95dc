import {
  DummyDriver,
  Kysely,
  MssqlAdapter,
  MssqlQueryCompiler,
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
import {
  createTableSql,
  idempotencyMigration,
  KyselyIdempotencyStore,
  type KyselyIdempotencyStoreOptions,
} from '../src/index.js'
import type { AppDatabase } from './support/databases.js'

// MySQL and driver edge cases that no database on this machine can produce on demand: a
// scripted connection answers each statement, so the store's reading of results is tested.
type Answer = (query: CompiledQuery) => QueryResult<unknown>

function scripted(
  adapter: DialectAdapter,
  compiler: () => QueryCompiler,
  answer: Answer,
  seen: string[] = [],
): Kysely<AppDatabase> {
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      seen.push(query.sql)
      return answer(query) as QueryResult<R>
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

const postgresScript = (answer: Answer, seen?: string[]): Kysely<AppDatabase> =>
  scripted(new PostgresAdapter(), () => new PostgresQueryCompiler(), answer, seen)
const mysqlScript = (answer: Answer, seen?: string[]): Kysely<AppDatabase> =>
  scripted(new MysqlAdapter(), () => new MysqlQueryCompiler(), answer, seen)

const NOW = 1_900_000_000_000
const options: KyselyIdempotencyStoreOptions = { now: () => NOW, purgeEvery: 0 }

describe('KyselyIdempotencyStore', () => {
  it('refuses to guess when the driver reports no affected-row count for the claim', async () => {
    const db = postgresScript(() => ({ rows: [] }))
    await expect(new KyselyIdempotencyStore(db, options).tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_RESULT_UNKNOWN',
    })
  })

  it('refuses to guess when a take-over reports no affected-row count, rather than saying in progress', async () => {
    const db = postgresScript((q) => {
      if (q.sql.startsWith('insert')) return { rows: [], numAffectedRows: 0n }
      if (q.sql.startsWith('select')) {
        return {
          rows: [
            {
              owner: 'crashed',
              claimed_at: '1',
              confirmed: false,
              confirmed_at: null,
              now_ms: String(NOW),
            },
          ],
        }
      }
      return { rows: [] }
    })
    await expect(new KyselyIdempotencyStore(db, options).tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_RESULT_UNKNOWN',
    })
  })

  it('on MySQL, reads only a duplicate-key error as "taken" and never uses INSERT IGNORE', async () => {
    const seen: string[] = []
    const db = mysqlScript((q) => {
      if (q.sql.startsWith('insert')) {
        throw Object.assign(new Error("Duplicate entry 'm-1' for key 'PRIMARY'"), {
          errno: 1062,
          code: 'ER_DUP_ENTRY',
        })
      }
      return {
        rows: [
          { owner: 'x', claimed_at: NOW - 5, confirmed: 1, confirmed_at: NOW - 1, now_ms: NOW },
        ],
      }
    }, seen)
    const store = new KyselyIdempotencyStore(db, options)
    expect(store.dialect).toBe('mysql')
    expect(await store.tryClaim('m-1')).toBe('duplicate')
    expect(seen[0]).toMatch(
      /^insert into `acemq_idempotency` \(id, owner, claimed_at, confirmed, confirmed_at\) values \(\?, \?, \?, false, null\)$/,
    )
    expect(seen.join('\n')).not.toMatch(/ignore/i)
  })

  it('on MySQL, passes any other insert error through', async () => {
    const db = mysqlScript(() => {
      throw Object.assign(new Error("Column 'tenant' cannot be null"), {
        errno: 1048,
        code: 'ER_BAD_NULL_ERROR',
      })
    })
    await expect(new KyselyIdempotencyStore(db, options).tryClaim('m-1')).rejects.toMatchObject({
      code: 'ER_BAD_NULL_ERROR',
    })
  })

  it('on MySQL, confirms with an upsert and purges with DELETE ... LIMIT', async () => {
    const seen: string[] = []
    const db = mysqlScript(() => ({ rows: [], numAffectedRows: 1n }), seen)
    const store = new KyselyIdempotencyStore(db, { ...options, purgeBatchSize: 250 })
    await store.confirm('m-1')
    expect(await store.purgeExpired()).toBe(1)
    expect(seen[0]).toContain('on duplicate key update confirmed = true, confirmed_at = ?')
    expect(seen[1]).toMatch(
      /^delete from `acemq_idempotency` where claimed_at < \? - 86400000 and .* limit 250$/,
    )
  })

  it.each([
    ['Postgres', postgresScript, 'floor(extract(epoch from statement_timestamp()) * 1000)::bigint'],
    ['MySQL', mysqlScript, "(timestampdiff(microsecond, '1970-01-01', utc_timestamp(3)) div 1000)"],
  ])(
    "on %s without a now option, reads every timestamp from the database's clock and sends none",
    async (_, script, clock) => {
      const queries: CompiledQuery[] = []
      const db = script((q) => {
        queries.push(q)
        if (q.sql.startsWith('select')) {
          return {
            rows: [{ owner: 'x', claimed_at: 1, confirmed: 0, confirmed_at: null, now_ms: 1 }],
          }
        }
        if (q.sql.startsWith('insert') && !q.sql.includes('update')) {
          return { rows: [], numAffectedRows: 0n }
        }
        return { rows: [], numAffectedRows: 1n }
      })
      const store = new KyselyIdempotencyStore(db, { purgeEvery: 0, retention: 1_000 })
      expect(await store.tryClaim('m-1')).toBe('in_progress')
      await store.isConfirmed('m-1')
      await store.confirm('m-1')
      await store.purgeExpired()
      expect(queries).toHaveLength(5)
      for (const query of queries) {
        expect(query.sql).toContain(clock)
        // Ids and owners only (a batched statement sends them as arrays), never a timestamp.
        expect(query.parameters.flat().every((p) => typeof p === 'string')).toBe(true)
      }
      expect(queries.at(-1)?.sql).toContain(`claimed_at < ${clock} - 1000`)
    },
  )

  it('refuses an adapter it cannot write SQL for, and accepts an explicit dialect', () => {
    const mssql = scripted(
      new MssqlAdapter(),
      () => new MssqlQueryCompiler(),
      () => ({ rows: [] }),
    )
    expect(() => new KyselyIdempotencyStore(mssql)).toThrow(
      /^dialect cannot be told .*MssqlAdapter/,
    )
    expect(new KyselyIdempotencyStore(mssql, { dialect: 'postgres' }).dialect).toBe('postgres')
    expect(() => new KyselyIdempotencyStore(mssql, { dialect: 'oracle' as never })).toThrow(
      /^dialect must be one of .*got "oracle"/,
    )
  })

  it('refuses something that is not a Kysely instance', () => {
    expect(() => new KyselyIdempotencyStore({} as never)).toThrow(/^db must be a Kysely instance/)
  })

  it.each(['x; drop table y', 'a-b', '', 'a'.repeat(100), '1abc', 'a.b.c', 'a.', '"quoted"'])(
    'refuses the table name %j with an error naming table and the value',
    (table) => {
      const db = postgresScript(() => ({ rows: [] }))
      const pattern = new RegExp(
        `^table must .*got ${JSON.stringify(table).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`,
      )
      expect(() => new KyselyIdempotencyStore(db, { table })).toThrow(pattern)
      expect(() => createTableSql({ table })).toThrow(pattern)
      expect(() => idempotencyMigration({ table })).toThrow(pattern)
    },
  )

  it.each([
    [{ retention: -1 }, 'retention'],
    [{ retention: '1 day' }, 'retention'],
    [{ claimTimeout: 0 }, 'claimTimeout'],
    [{ purgeEvery: 1.5 }, 'purgeEvery'],
    [{ purgeBatchSize: 0 }, 'purgeBatchSize'],
    [{ now: 1 }, 'now'],
    [{ onError: 'log' }, 'onError'],
  ])('refuses the options %j with an error naming %s', (bad, name) => {
    const db = postgresScript(() => ({ rows: [] }))
    expect(() => new KyselyIdempotencyStore(db, bad as never)).toThrow(
      expect.objectContaining({
        code: 'ACEMQ_CONFIGURATION',
        message: expect.stringMatching(new RegExp(`^${name} must .*got`)),
      }),
    )
  })
})

describe('createTableSql', () => {
  it('writes Postgres DDL by default', () => {
    expect(createTableSql()).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "acemq_idempotency" (',
        '  id text PRIMARY KEY,',
        '  owner text NOT NULL,',
        '  claimed_at bigint NOT NULL,',
        '  confirmed boolean NOT NULL DEFAULT false,',
        '  confirmed_at bigint',
        ');',
        '',
        'CREATE INDEX IF NOT EXISTS "acemq_idempotency_claimed_at_idx" ON "acemq_idempotency" (claimed_at);',
        '',
      ].join('\n'),
    )
  })

  it('qualifies the table with its schema the way each dialect wants', () => {
    expect(createTableSql({ table: 'app.seen' })).toContain(
      'CREATE INDEX IF NOT EXISTS "seen_claimed_at_idx" ON "app"."seen" (claimed_at)',
    )
    expect(createTableSql({ table: 'app.seen', dialect: 'sqlite' })).toContain(
      'CREATE INDEX IF NOT EXISTS "app"."seen_claimed_at_idx" ON "seen" (claimed_at)',
    )
    expect(createTableSql({ table: 'app.seen', dialect: 'mysql' })).toContain(
      'CREATE TABLE IF NOT EXISTS `app`.`seen` (',
    )
  })

  it('keeps MySQL ids as bytes, so trailing spaces are not padded away', () => {
    expect(createTableSql({ dialect: 'mysql' })).toContain('id VARBINARY(255) NOT NULL PRIMARY KEY')
  })

  it('keeps index names within 63 characters', () => {
    const sql = createTableSql({ table: 'a'.repeat(63) })
    const index = /INDEX IF NOT EXISTS "([^"]+)"/.exec(sql)?.[1] ?? ''
    expect(index.length).toBeLessThanOrEqual(63)
  })
})
