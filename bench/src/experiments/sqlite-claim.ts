// What the BEGIN IMMEDIATE transaction around a claim on a new id costs, measured on
// better-sqlite3 alone: 20,000 claims + confirms on a fresh WAL file (the store's table and
// statements), the insert inside a transaction (as the SQLite store did) or on its own (as it
// does now, keeping the transaction for conflicts), interleaved in one process for 4 rounds.
// Printed: CPU µs per claim + confirm.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/sqlite-claim.ts
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { SqliteIdempotencyStore } from '@acemq/store-sqlite'
import BetterSqlite3 from 'better-sqlite3'

const COUNT = 20_000
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acemq-sqlite-claim-'))

function run(variant: 'transaction' | 'insert', round: number): number {
  const db = new BetterSqlite3(path.join(dir, `${variant}-${round}.db`))
  db.pragma('journal_mode = WAL')
  db.exec(SqliteIdempotencyStore.createTableSql())
  const insert = db.prepare(
    'INSERT INTO acemq_idempotency (id, owner, claimed_at, confirmed, confirmed_at) VALUES (?, ?, ?, 0, NULL) ON CONFLICT (id) DO NOTHING',
  )
  const confirm = db.prepare(
    'INSERT INTO acemq_idempotency (id, owner, claimed_at, confirmed, confirmed_at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (id) DO UPDATE SET confirmed = 1, confirmed_at = excluded.confirmed_at',
  )
  const inTransaction = db.transaction(
    (id: string, owner: string, now: number) => insert.run(id, owner, now).changes,
  )
  const started = process.cpuUsage()
  for (let i = 0; i < COUNT; i++) {
    const id = `m-${i}`
    const owner = randomUUID()
    const now = Date.now()
    if (variant === 'transaction') inTransaction.immediate(id, owner, now)
    else insert.run(id, owner, now)
    confirm.run(id, owner, now, now)
  }
  const { user, system } = process.cpuUsage(started)
  db.close()
  return (user + system) / COUNT
}

const results = { transaction: [] as number[], insert: [] as number[] }
for (let round = 0; round < 4; round++) {
  for (const variant of ['transaction', 'insert'] as const)
    results[variant].push(run(variant, round))
}
fs.rmSync(dir, { recursive: true, force: true })
for (const [variant, cpu] of Object.entries(results)) {
  console.log(`${variant}: CPU µs per claim + confirm ${cpu.map((x) => x.toFixed(1)).join(', ')}`)
}
