import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely'
import { createPool } from 'mysql2'
import pg from 'pg'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { OutboxRecord, type OutboxStore } from '@acemq/core'
import { KyselyOutboxStore, outboxMigration } from '@acemq/store-kysely'
import { DATABASE_URL, MYSQL_URL, requireMysql, requirePostgres, uniqueName } from '@acemq/testing'
import { runCli } from './support/run-cli.js'

// better-sqlite3 is an optional peer of the cli, without its types here.
const sqliteDriver = 'better-sqlite3'
const { default: Database } = (await import(sqliteDriver)) as {
  default: new (path: string) => SqliteDatabase
}

/** An outbox with `retired` records retired (unroutable, once) and one still pending. */
async function outboxWithRetired(
  store: OutboxStore,
  add: (record: OutboxRecord) => Promise<void>,
  retired: readonly string[],
): Promise<void> {
  for (const id of retired) {
    await add(OutboxRecord.of('orders', 'order.placed', { id }, { id }))
    await store.claimBatch(1, 30_000)
    expect(await store.markFailed(id, `NO_ROUTE: no queue for ${id}`, 1)).toBe('retired')
  }
  await add(OutboxRecord.of('orders', 'order.placed', { id: 'pending' }, { id: 'pending' }))
}

interface Listed {
  readonly table: string
  readonly retired: readonly { id: string; attempts: number; lastError: string }[]
}

function kyselyCases(
  name: string,
  open: () => { db: Kysely<unknown>; url: string; done?: () => void },
): void {
  describe(`acemq outbox retired / reoffer on ${name}`, () => {
    let db: Kysely<unknown>
    let url: string
    let done: (() => void) | undefined
    let table: string
    let store: KyselyOutboxStore

    beforeEach(async () => {
      ;({ db, url, done } = open())
      table = uniqueName('acemq_outbox_cli').replace(/\./g, '_')
      await outboxMigration({ table }).up(db)
      store = new KyselyOutboxStore(db, { table })
      await outboxWithRetired(store, (record) => store.add(db, record), ['order-1', 'order-2'])
    })

    afterEach(async () => {
      await outboxMigration({ table }).down(db)
      await db.destroy()
      done?.()
    })

    it('lists the retired records with their attempts and why, then re-offers the ones named and the rest with --all', async () => {
      const base = ['--database-url', url, '--table', table]
      const listed = await runCli(['--json', 'outbox', 'retired', ...base])
      expect(listed.code).toBe(0)
      const parsed = JSON.parse(listed.stdout) as Listed
      expect(parsed.retired.map((r) => [r.id, r.attempts]).sort()).toEqual([
        ['order-1', 1],
        ['order-2', 1],
      ])
      expect(parsed.retired[0]?.lastError).toMatch(/^NO_ROUTE: no queue for order-/)

      const human = await runCli(['outbox', 'retired', ...base])
      expect(human.stdout).toContain(`2 retired record(s) in ${table}`)
      expect(human.stdout).toContain('NO_ROUTE: no queue for order-1')

      const one = await runCli(['--json', 'outbox', 'reoffer', 'order-1', ...base])
      expect(one.code).toBe(0)
      expect(JSON.parse(one.stdout)).toMatchObject({ reoffered: 1, notRetired: 0 })
      const rest = await runCli(['outbox', 'reoffer', '--all', ...base])
      expect(rest.code).toBe(0)
      expect(rest.stdout).toContain('re-offered 1 record(s)')
      expect(await store.retired()).toEqual([])
      const offered = await store.claimBatch(10, 30_000)
      expect(offered.map((r) => [r.id, r.attempts]).sort()).toEqual([
        ['order-1', 0],
        ['order-2', 0],
        ['pending', 0],
      ])
    }, 60_000)

    it('exits 1 when none of the records named was retired, and 2 without ids or --all', async () => {
      const base = ['--database-url', url, '--table', table]
      const none = await runCli(['outbox', 'reoffer', 'no-such-record', 'pending', ...base])
      expect(none.code).toBe(1)
      expect(none.stdout).toContain('2 of the 2 named were not retired')
      const neither = await runCli(['outbox', 'reoffer', ...base])
      expect(neither.code).toBe(2)
      expect(neither.stderr).toContain('--all')
      expect((await store.retired()).length).toBe(2)
    }, 60_000)

    it('says a missing table is missing, with ACEMQ_STORE_TABLE_MISSING and the way to create it', async () => {
      const run = await runCli([
        'outbox',
        'retired',
        '--database-url',
        url,
        '--table',
        `${table}_nope`,
      ])
      expect(run.code).toBe(1)
      expect(run.stderr).toContain('ACEMQ_STORE_TABLE_MISSING')
      expect(run.stderr).toContain('acemq outbox sql')
    }, 60_000)
  })
}

const hasPostgres = await requirePostgres()

describe.runIf(hasPostgres)('Postgres', () => {
  kyselyCases('Postgres', () => ({
    db: new Kysely<unknown>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: DATABASE_URL, max: 2 }),
      }),
    }),
    url: DATABASE_URL,
  }))

  it('never prints the database password, even when the connection fails', async () => {
    const url = new URL(DATABASE_URL)
    url.password = 'Sup3r-s3cret'
    url.port = '1'
    const run = await runCli(['outbox', 'retired', '--database-url', url.toString()])
    expect(run.code).toBe(1)
    expect(`${run.stdout}${run.stderr}`).not.toContain('Sup3r-s3cret')
  }, 60_000)
})

describe.runIf(await requireMysql())('MariaDB', () => {
  kyselyCases('MariaDB', () => ({
    db: new Kysely<unknown>({
      dialect: new MysqlDialect({ pool: createPool({ uri: MYSQL_URL, connectionLimit: 2 }) }),
    }),
    url: MYSQL_URL,
  }))
})

kyselyCases('a SQLite file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'acemq-cli-outbox-'))
  const path = join(dir, 'app.db')
  return {
    db: new Kysely<unknown>({ dialect: new SqliteDialect({ database: new Database(path) }) }),
    url: `sqlite://${path}`,
    done: () => rmSync(dir, { recursive: true, force: true }),
  }
})

describe('acemq outbox --database-url', () => {
  it('refuses a URL of no database it knows, and a SQLite file that does not exist', async () => {
    const redis = await runCli(['outbox', 'retired', '--database-url', 'redis://127.0.0.1:6379'])
    expect(redis.code).toBe(2)
    expect(redis.stderr).toContain('postgres://')
    const missing = await runCli([
      'outbox',
      'retired',
      '--database-url',
      join(tmpdir(), 'no-such-dir-acemq', 'x.db'),
    ])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/does not exist|unable to open/i)
  }, 60_000)
})
