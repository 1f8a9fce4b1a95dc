import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { Kysely, Migrator, SqliteDialect } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { OutboxRecord } from '@acemq/core'
import { outboxStoreConformance } from '@acemq/testing'
import { SqliteOutboxStore, outboxMigration } from '../src/index.js'

const here = dirname(fileURLToPath(import.meta.url))
const repoRoot = resolve(here, '../../..')

outboxStoreConformance('SqliteOutboxStore', {
  transactional: true,
  async create({ maxAttempts, now }) {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-outbox-'))
    const path = join(dir, 'outbox.db')
    const db = new Database(path)
    db.pragma('journal_mode = WAL')
    db.exec(SqliteOutboxStore.createTableSql())
    const store = new SqliteOutboxStore(db, { maxAttempts, now })
    const others: SqliteOutboxStore[] = []
    return {
      store,
      async second() {
        // A connection of its own to the file, as another process would have.
        const other = new SqliteOutboxStore(path, { maxAttempts, now })
        others.push(other)
        return other
      },
      async add(record) {
        db.transaction(() => store.add(db, record))()
      },
      async addAndRollBack(record) {
        db.transaction(() => {
          store.add(db, record)
          throw new Error('roll back')
        })()
      },
      async cleanup() {
        for (const other of others) await other.close()
        db.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

describe('SqliteOutboxStore', () => {
  let dir: string
  let path: string
  let db: Database.Database

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-outbox-'))
    path = join(dir, 'app.db')
    db = new Database(path)
    db.pragma('journal_mode = WAL')
    db.exec(SqliteOutboxStore.createTableSql())
    db.exec('create table orders (id text primary key, total integer not null)')
  })

  afterEach(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('writes the record inside the caller’s better-sqlite3 transaction, committing and rolling back with the order', async () => {
    const outbox = new SqliteOutboxStore(db)
    const insert = db.prepare('insert into orders (id, total) values (?, ?)')
    const place = db.transaction((id: string, total: number) => {
      insert.run(id, total)
      outbox.add(db, OutboxRecord.of('', 'orders.placed', { id }, { id }))
      if (total < 0) throw new Error('a negative total')
    })
    place('o-1', 10)
    expect(() => place('o-2', -1)).toThrow('a negative total')
    expect(() => place('o-1', 3)).toThrow()
    expect(db.prepare('select id from orders').all()).toEqual([{ id: 'o-1' }])
    expect((await outbox.claimBatch(10, 30_000)).map((r) => r.id)).toEqual(['o-1'])
    await outbox.markPublished('o-1')
    expect(await outbox.purgePublished(0)).toBe(1)
  })

  it('reports a missing outbox table as ACEMQ_STORE_TABLE_MISSING, with the way to create it', async () => {
    const store = new SqliteOutboxStore(db, { table: 'outbox_never_made' })
    const missing = { code: 'ACEMQ_STORE_TABLE_MISSING', message: /createTableSql\(\)/ }
    await expect(store.claimBatch(10, 30_000)).rejects.toMatchObject(missing)
    await expect(store.stats()).rejects.toMatchObject(missing)
    await expect(store.verify()).rejects.toMatchObject(missing)
    let thrown: unknown
    try {
      store.add(db, OutboxRecord.of('', 'q', {}))
    } catch (error) {
      thrown = error
    }
    expect(thrown).toMatchObject(missing)
  })

  it('creates the table through a Kysely Migrator, the same DDL as createTableSql', async () => {
    const kysely = new Kysely<unknown>({
      dialect: new SqliteDialect({ database: new Database(join(dir, 'migrated.db')) }),
    })
    try {
      const migrator = new Migrator({
        db: kysely,
        provider: { getMigrations: async () => ({ '0001_outbox': outboxMigration() }) },
      })
      expect((await migrator.migrateToLatest()).error).toBeUndefined()
      const store = new SqliteOutboxStore(join(dir, 'migrated.db'))
      expect(await store.stats()).toMatchObject({ pending: 0, retired: 0 })
      await store.close()
      expect((await migrator.migrateDown()).error).toBeUndefined()
    } finally {
      await kysely.destroy()
    }
  })

  it('lets two processes on one WAL file relay 1,000 records without ever claiming one twice', async () => {
    const outbox = new SqliteOutboxStore(db)
    const ids = Array.from({ length: 1_000 }, (_, i) => `order-${i}`)
    db.transaction(() => {
      for (const id of ids) outbox.add(db, OutboxRecord.of('', 'orders.placed', { id }, { id }))
    })()
    const worker = join(here, 'support', 'outbox-claim-worker.ts')
    const children = Array.from({ length: 2 }, () =>
      spawn(process.execPath, ['--conditions=@acemq/source', '--import', 'tsx', worker, path], {
        cwd: repoRoot,
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
    )
    const outputs = children.map((child) => collect(child))
    await Promise.all(outputs.map((o) => o.ready))
    for (const child of children) child.stdin.write('go\n')
    // Each holds its first batch until both have one: the race is real however the two
    // processes are scheduled.
    await Promise.all(outputs.map((o) => o.first))
    for (const child of children) child.stdin.end('go\n')
    const results = (await Promise.all(outputs.map((o) => o.done))).map(
      (line) => JSON.parse(line) as { claimed: string[] },
    )
    const claimed = results.flatMap((r) => r.claimed)
    expect(claimed).toHaveLength(ids.length)
    expect(new Set(claimed).size).toBe(ids.length)
    expect(results.every((r) => r.claimed.length > 0)).toBe(true)
    expect(await outbox.pendingCount()).toBe(0)
  }, 60_000)
})

function collect(child: ReturnType<typeof spawn>): {
  ready: Promise<void>
  first: Promise<void>
  done: Promise<string>
} {
  let out = ''
  let err = ''
  let onReady: () => void = () => {}
  let onFirst: () => void = () => {}
  let onFirstFailed: (error: Error) => void = () => {}
  const ready = new Promise<void>((resolve) => (onReady = resolve))
  const first = new Promise<void>((resolve, reject) => {
    onFirst = resolve
    onFirstFailed = reject
  })
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const done = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.startsWith('ready\n')) onReady()
      if (out.startsWith('ready\nfirst\n')) onFirst()
    })
    child.on('exit', (code) => {
      const lines = out.trim().split('\n')
      if (code === 0 && lines.length === 3) resolve(lines[2] ?? '')
      else {
        const error = new Error(`worker exited with ${String(code)}: ${err || out}`)
        onFirstFailed(error)
        reject(error)
      }
    })
  })
  return { ready, first, done }
}
