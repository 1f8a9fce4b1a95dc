import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SqliteIdempotencyStore } from '../src/index.js'

// A database that does not do what the store asked is an error, named after the statement,
// never a guess; and a purge never takes a claim that is still live (found by mutation
// testing, docs/mutation.md).

describe('SqliteIdempotencyStore against a database that misbehaves', () => {
  let dir: string
  let db: Database.Database
  let clock: number

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'acemq-sqlite-edges-'))
    db = new Database(join(dir, 'idempotency.db'))
    db.exec(SqliteIdempotencyStore.createTableSql())
    clock = Date.UTC(2030, 0, 1)
  })

  afterEach(() => {
    db.close()
    rmSync(dir, { recursive: true, force: true })
  })

  const store = (options: { retention?: number; claimTimeout?: number } = {}) =>
    new SqliteIdempotencyStore(db, {
      claimTimeout: 60_000,
      retention: 3_600_000,
      purgeEvery: 0,
      now: () => clock,
      ...options,
    })

  /** Every UPDATE of the table silently does nothing from now on. */
  const ignoreUpdates = (): void => {
    db.exec(
      'CREATE TRIGGER ignore_updates BEFORE UPDATE ON acemq_idempotency BEGIN SELECT RAISE(IGNORE); END',
    )
  }

  it('rejects a take-over the database ignored, naming it', async () => {
    await store().tryClaim('m-1', 'owner-a')
    clock += 60_001
    ignoreUpdates()
    await expect(store().tryClaim('m-1', 'owner-b')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_INCONSISTENT',
      message: 'the idempotency take over changed 0 rows instead of 1; refusing to guess',
    })
  })

  it('rejects a reclaim of an expired id the database ignored, naming it', async () => {
    await store().confirm('m-1', 'owner-a')
    clock += 3_600_001
    ignoreUpdates()
    await expect(store().tryClaim('m-1', 'owner-b')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_INCONSISTENT',
      message: 'the idempotency reclaim changed 0 rows instead of 1; refusing to guess',
    })
  })

  it('rejects a confirm the database ignored, naming it', async () => {
    await store().tryClaim('m-1', 'owner-a')
    ignoreUpdates()
    await expect(store().confirm('m-1', 'owner-a')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_INCONSISTENT',
      message: 'the idempotency confirm changed 0 rows instead of 1; refusing to guess',
    })
  })

  it('rejects a claim whose insert the database ignored without a conflicting row', async () => {
    db.exec(
      'CREATE TRIGGER ignore_inserts BEFORE INSERT ON acemq_idempotency BEGIN SELECT RAISE(IGNORE); END',
    )
    await expect(store().tryClaim('m-1')).rejects.toMatchObject({
      code: 'ACEMQ_STORE_INCONSISTENT',
      message: 'the claim on "m-1" conflicted with no row',
    })
  })

  it('never purges a claim younger than the claim timeout, even past the retention', async () => {
    const s = store({ retention: 1_000, claimTimeout: 5_000 })
    await s.tryClaim('m-1', 'owner-a')
    clock += 2_000
    expect(await s.purgeExpired()).toBe(0)
    expect(await store().tryClaim('m-1', 'owner-b')).toBe('in_progress')
    clock += 3_001
    expect(await s.purgeExpired()).toBe(1)
  })
})
