import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { idempotencyStoreConformance } from '@acemq/testing'
import { SqliteIdempotencyStore, type SqliteIdempotencyStoreOptions } from '../src/index.js'

const here = fileURLToPath(new URL('.', import.meta.url))
const repoRoot = resolve(here, '../../..')

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'acemq-sqlite-'))
}

idempotencyStoreConformance('SqliteIdempotencyStore on a file', {
  async create({ claimTimeoutMs, retentionMs, now }) {
    const dir = tempDir()
    const path = join(dir, 'idempotency.db')
    const setup = new Database(path)
    setup.exec(SqliteIdempotencyStore.createTableSql())
    setup.close()
    const options: SqliteIdempotencyStoreOptions = {
      claimTimeout: claimTimeoutMs,
      retention: retentionMs,
      now,
    }
    const stores: SqliteIdempotencyStore[] = []
    return {
      store: new SqliteIdempotencyStore(path, options),
      async second() {
        const store = new SqliteIdempotencyStore(path, options)
        stores.push(store)
        return store
      },
      async cleanup() {
        for (const store of stores) await store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})

describe('SqliteIdempotencyStore', () => {
  let dir: string
  let path: string
  let db: Database.Database

  beforeEach(() => {
    dir = tempDir()
    path = join(dir, 'idempotency.db')
    db = new Database(path)
  })

  afterEach(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const rows = (table = 'acemq_idempotency'): number =>
    (db.prepare(`SELECT count(*) AS n FROM "${table}"`).get() as { n: number }).n

  it('creates its table with createTableSql(), and running it twice is harmless', () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    db.exec(new SqliteIdempotencyStore(db).createTableSql())
    const columns = db.prepare(`PRAGMA table_info("acemq_idempotency")`).all() as {
      name: string
      type: string
      pk: number
    }[]
    expect(columns.map((c) => [c.name, c.type, c.pk])).toEqual([
      ['id', 'TEXT', 1],
      ['owner', 'TEXT', 0],
      ['claimed_at', 'INTEGER', 0],
      ['confirmed', 'INTEGER', 0],
      ['confirmed_at', 'INTEGER', 0],
    ])
    const indexes = db.prepare(`PRAGMA index_list("acemq_idempotency")`).all() as { name: string }[]
    expect(indexes.map((i) => i.name)).toContain('acemq_idempotency_claimed_at_idx')
  })

  it('never runs DDL itself: a missing table is reported with the way to create it', async () => {
    const store = new SqliteIdempotencyStore(db)
    await expect(store.tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_TABLE_MISSING',
      message: expect.stringContaining('createTableSql()'),
    })
    db.exec(store.createTableSql())
    expect(await store.tryClaim('m-1')).toBe('claimed')
  })

  it('uses a schema-qualified table in an attached database', async () => {
    db.exec(`ATTACH DATABASE '${join(dir, 'aux.db')}' AS aux`)
    db.exec(SqliteIdempotencyStore.createTableSql({ table: 'aux.seen' }))
    const store = new SqliteIdempotencyStore(db, { table: 'aux.seen' })
    expect(await store.tryClaim('m-1')).toBe('claimed')
    expect(rows('seen')).toBe(1)
  })

  it.each(['x; drop table y', 'a-b', '', 'a'.repeat(100), '1abc', 'a.b.c', 'sp ace', '"quoted"'])(
    'refuses the table name %j with an error naming table and the value',
    (table) => {
      expect(() => new SqliteIdempotencyStore(db, { table })).toThrow(
        expect.objectContaining({
          code: 'ACEMQ_CONFIGURATION',
          message: expect.stringMatching(
            new RegExp(`^table must .*got ${escape(JSON.stringify(table))}`),
          ),
        }),
      )
      expect(() => SqliteIdempotencyStore.createTableSql({ table })).toThrow(/^table must/)
    },
  )

  it.each([
    [{ retention: -5 }, 'retention'],
    [{ claimTimeout: 0 }, 'claimTimeout'],
    [{ busyTimeout: 'soon' }, 'busyTimeout'],
    [{ purgeEvery: -1 }, 'purgeEvery'],
    [{ purgeBatchSize: 0 }, 'purgeBatchSize'],
    [{ now: 'yesterday' }, 'now'],
  ])('refuses the options %j with an error naming %s', (options, name) => {
    expect(() => new SqliteIdempotencyStore(db, options as never)).toThrow(
      new RegExp(`^${name} must .*got`),
    )
  })

  it('refuses something that is neither a database nor a path', () => {
    expect(() => new SqliteIdempotencyStore(42 as never)).toThrow(/^databaseOrPath must .*got 42/)
    expect(() => new SqliteIdempotencyStore('')).toThrow(/^databaseOrPath must/)
  })

  it('rejects a claim that a trigger refuses, instead of calling it in progress', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    db.exec(
      `CREATE TRIGGER refuse BEFORE INSERT ON acemq_idempotency BEGIN SELECT RAISE(ABORT, 'disk on fire'); END`,
    )
    const store = new SqliteIdempotencyStore(db)
    await expect(store.tryClaim('m-1')).rejects.toThrow('disk on fire')
    await expect(store.claim('m-1')).rejects.toThrow('disk on fire')
  })

  it('rejects a claim that violates a NOT NULL constraint', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    db.exec(`ALTER TABLE acemq_idempotency ADD COLUMN tenant TEXT NOT NULL DEFAULT 'x'`)
    db.exec(`CREATE TABLE strict_copy (id TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, claimed_at INTEGER NOT NULL,
             confirmed INTEGER NOT NULL, confirmed_at INTEGER, tenant TEXT NOT NULL)`)
    const store = new SqliteIdempotencyStore(db, { table: 'strict_copy' })
    await expect(store.tryClaim('m-1')).rejects.toThrow(/NOT NULL/)
  })

  it('rejects a claim when another connection holds the write lock past the busy timeout', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    const store = new SqliteIdempotencyStore(path, { busyTimeout: 50 })
    db.exec('BEGIN IMMEDIATE')
    try {
      await expect(store.tryClaim('m-1')).rejects.toThrow(/locked|busy/i)
    } finally {
      db.exec('ROLLBACK')
      await store.close()
    }
  })

  it('opens a path in WAL mode and closes it on close(), after which calls reject', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    const store = new SqliteIdempotencyStore(path)
    expect(await store.tryClaim('m-1')).toBe('claimed')
    const other = new Database(path, { readonly: true })
    expect(other.pragma('journal_mode', { simple: true })).toBe('wal')
    other.close()
    await store.close()
    await store.close()
    await expect(store.tryClaim('m-2')).rejects.toMatchObject({ code: 'ACEMQ_CLOSED' })
  })

  it("judges leases by the process's clock when no now option is given", async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      const a = new SqliteIdempotencyStore(db, { claimTimeout: '1m' })
      const b = new SqliteIdempotencyStore(db, { claimTimeout: '1m' })
      expect(await a.tryClaim('m-1')).toBe('claimed')
      vi.setSystemTime(Date.now() + 60_001)
      expect(await b.tryClaim('m-1')).toBe('claimed')
    } finally {
      vi.useRealTimers()
    }
  })

  it('leaves a database it was given open when closed', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    const store = new SqliteIdempotencyStore(db)
    await store.close()
    expect(db.open).toBe(true)
  })

  describe('purging', () => {
    let clock: number
    const base = (options: SqliteIdempotencyStoreOptions = {}): SqliteIdempotencyStore =>
      new SqliteIdempotencyStore(db, {
        retention: 1_000,
        claimTimeout: 100,
        now: () => clock,
        ...options,
      })

    beforeEach(async () => {
      clock = 1_000_000
      db.exec(SqliteIdempotencyStore.createTableSql())
      const seed = base({ purgeEvery: 0 })
      for (let i = 0; i < 250; i++) {
        await seed.tryClaim(`old-${i}`)
        await seed.confirm(`old-${i}`)
      }
      await seed.tryClaim('old-unconfirmed')
      clock += 2_000
    })

    it('deletes expired rows in batches of purgeBatchSize', async () => {
      const store = base({ purgeEvery: 0, purgeBatchSize: 100 })
      await store.tryClaim('live')
      await store.tryClaim('recent')
      await store.confirm('recent')
      expect(rows()).toBe(253)
      expect(await store.purgeExpired()).toBe(100)
      expect(rows()).toBe(153)
      expect(await store.purgeExpired()).toBe(100)
      expect(await store.purgeExpired()).toBe(51)
      expect(await store.purgeExpired()).toBe(0)
      expect(rows()).toBe(2)
    })

    it('purges one batch on every purgeEvery-th claim, not on every call', async () => {
      const store = base({ purgeEvery: 5, purgeBatchSize: 10 })
      for (let i = 1; i <= 4; i++) await store.tryClaim(`new-${i}`)
      expect(rows()).toBe(251 + 4)
      await store.tryClaim('new-5')
      expect(rows()).toBe(251 + 5 - 10)
    })

    it('reports a failed purge without failing the claim that triggered it', async () => {
      db.exec(
        `CREATE TRIGGER no_delete BEFORE DELETE ON acemq_idempotency BEGIN SELECT RAISE(ABORT, 'no deletes today'); END`,
      )
      const errors: unknown[] = []
      const store = base({ purgeEvery: 1, onError: (e) => errors.push(e) })
      expect(await store.tryClaim('new')).toBe('claimed')
      expect(errors).toHaveLength(1)
      expect(String(errors[0])).toContain('no deletes today')
    })
  })

  it('lets exactly one of four processes claim each id on one WAL file', async () => {
    db.exec(SqliteIdempotencyStore.createTableSql())
    const ids = Array.from({ length: 2_000 }, (_, i) => `order-${i}`)
    // A quarter of the ids start as claims a crashed consumer left 10 minutes ago: the
    // processes race to take them over as well.
    const crashed = new SqliteIdempotencyStore(db, { now: () => Date.now() - 600_000 })
    for (const id of ids.filter((_, i) => i % 4 === 0)) await crashed.tryClaim(id)

    const worker = join(here, 'support', 'claim-worker.ts')
    const children = Array.from({ length: 4 }, () =>
      spawn(
        process.execPath,
        ['--conditions=@acemq/source', '--import', 'tsx', worker, path, JSON.stringify(ids)],
        { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] },
      ),
    )
    const outputs = children.map((child) => collect(child))
    await Promise.all(outputs.map((o) => o.ready))
    const started = performance.now()
    for (const child of children) child.stdin.end('go\n')
    const results = (await Promise.all(outputs.map((o) => o.done))).map(
      (line) => JSON.parse(line) as { claimed: string[]; answers: Record<string, number> },
    )
    const elapsed = performance.now() - started

    const claimed = results.flatMap((r) => r.claimed)
    expect(claimed).toHaveLength(ids.length)
    expect(new Set(claimed).size).toBe(ids.length)
    expect(rows()).toBe(ids.length)
    console.log(
      `4 processes, ${ids.length} ids (${ids.length / 4} stale): claims per process ${results
        .map((r) => r.claimed.length)
        .join(
          '/',
        )}, answers ${JSON.stringify(results.map((r) => r.answers))}, ${elapsed.toFixed(0)} ms`,
    )
  }, 60_000)
})

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function collect(child: ReturnType<typeof spawn>): { ready: Promise<void>; done: Promise<string> } {
  let out = ''
  let err = ''
  let onReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (onReady = resolve))
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()))
  const done = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.startsWith('ready\n')) onReady()
    })
    child.on('exit', (code) => {
      const lines = out.trim().split('\n')
      if (code === 0 && lines.length === 2) resolve(lines[1] ?? '')
      else reject(new Error(`worker exited with ${String(code)}: ${err || out}`))
    })
  })
  return { ready, done }
}
