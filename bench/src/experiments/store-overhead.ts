// Where the Kysely + Postgres idempotent consumer's extra CPU goes, measured without the broker:
// the same claim + confirm per id, 20 at a time, three ways, each in a fresh process, interleaved.
//   pg         the two statements through a pg pool (the floor of comparison 3)
//   pg+als     the same, with an AsyncLocalStorage enabled and each id run inside als.run(),
//              as @acemq's consumer does around every handler: Node 20 then runs promise hooks
//              for every promise in the process
//   kysely     KyselyIdempotencyStore.tryClaim + confirm (the store @acemq uses)
//   kysely+als the same inside als.run(), as under @acemq's consumer: what the promises the
//              store makes per statement cost once Node 20's promise hooks are on
//   kysely-compiled  the two statements of the pg variant through the same Kysely instance, as
//              CompiledQuery.raw(sql, parameters): Kysely's driver path without building and
//              compiling a query per call
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/store-overhead.ts
import { AsyncLocalStorage } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import type { Worker } from '../comparisons/comparison.js'
import { openStatements, pgPool, timedIds, withStorage } from '../comparisons/idempotent.js'
import { runInChild } from '../internal/child.js'
import { DATABASE_URL, QUICK } from '../internal/config.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { interleave } from '../internal/rounds.js'
import { fmt, median } from '../internal/stats.js'
import { runWhenMain, writeResult } from './experiment.js'

const VARIANTS = ['pg', 'pg+als', 'kysely', 'kysely+als', 'kysely-compiled'] as const
type Variant = (typeof VARIANTS)[number]

interface Params {
  readonly variant: Variant
  readonly table: string
  readonly warmup: number
  readonly count: number
  readonly concurrency: number
}

interface Step {
  step(id: string): Promise<void>
  close(): Promise<void>
}

function open(p: Params): Step {
  if (p.variant === 'kysely-compiled') {
    const db = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({ pool: pgPool(p.concurrency) }),
    })
    const t = `"${p.table}"`
    const insert = `insert into ${t} (id, owner, claimed_at, confirmed, confirmed_at) values ($1, $2, $3, false, null) on conflict (id) do nothing`
    const confirm = `update ${t} set confirmed = true, confirmed_at = $1 where id = $2`
    return {
      step: async (id) => {
        await db.executeQuery(CompiledQuery.raw(insert, [id, randomUUID(), Date.now()]))
        await db.executeQuery(CompiledQuery.raw(confirm, [Date.now(), id]))
      },
      close: () => db.destroy(),
    }
  }
  if (p.variant === 'kysely' || p.variant === 'kysely+als') {
    const db = new Kysely<Record<string, never>>({
      dialect: new PostgresDialect({ pool: pgPool(p.concurrency) }),
    })
    const store = new KyselyIdempotencyStore(db, { table: p.table })
    const step = async (id: string): Promise<void> => {
      await store.tryClaim(id)
      await store.confirm(id)
    }
    const als = new AsyncLocalStorage<string>()
    return {
      step: p.variant === 'kysely' ? step : (id) => als.run(id, () => step(id)),
      close: async () => {
        await store.close()
        await db.destroy()
      },
    }
  }
  const statements = openStatements({
    store: 'postgres',
    concurrency: p.concurrency,
    table: p.table,
  })
  if (p.variant === 'pg')
    return { step: async (id) => statements.step(id), close: statements.close }
  const als = new AsyncLocalStorage<string>()
  return {
    step: (id) => als.run(id, async () => statements.step(id)),
    close: statements.close,
  }
}

const drive: Worker = async (params) => {
  const p = params as Params
  const { step, close } = open(p)
  try {
    const ids = (n: number): string[] => Array.from({ length: n }, () => randomUUID())
    await timedIds(ids(p.warmup), p.concurrency, step)
    collectGarbage()
    const measuredIds = ids(p.count)
    return await measured(undefined, () => timedIds(measuredIds, p.concurrency, step))
  } finally {
    await close()
  }
}

export const workers: Readonly<Record<string, Worker>> = { 'experiment:store-overhead': drive }

async function main(): Promise<void> {
  const rounds = QUICK ? 2 : 5
  const count = QUICK ? 500 : 6_000
  const warmup = QUICK ? 200 : 2_000
  const client = new pg.Client(DATABASE_URL)
  await client.connect()
  try {
    const runs = await interleave({
      name: 'store overhead',
      variants: VARIANTS,
      rounds,
      unit: 'ms',
      log: (line) => console.log(line),
      recover: async () => undefined,
      measure: (variant) =>
        withStorage(client, 'postgres', ({ table }) =>
          runInChild<Measured>({
            worker: 'experiment:store-overhead',
            params: {
              variant,
              table: table as string,
              warmup,
              count,
              concurrency: 20,
            } satisfies Params,
          }),
        ),
    })
    const perId = (variant: Variant, key: 'ms' | 'cpuMs'): number[] =>
      runs[variant].map((r) => (r[key] * 1000) / count)
    const result = Object.fromEntries(
      VARIANTS.map((v) => [v, { wallUsPerId: perId(v, 'ms'), cpuUsPerId: perId(v, 'cpuMs') }]),
    )
    console.log('\n| variant | wall µs/id (median) | CPU µs/id (median) | CPU per round |')
    console.log('|---|--:|--:|---|')
    for (const v of VARIANTS) {
      const cpu = perId(v, 'cpuMs')
      console.log(
        `| ${v} | ${fmt(median(perId(v, 'ms')))} | ${fmt(median(cpu))} | ${cpu.map((x) => fmt(x)).join(', ')} |`,
      )
    }
    writeResult('store-overhead', { rounds, count, concurrency: 20, result })
  } finally {
    await client.end()
  }
}

runWhenMain(import.meta.url, main)
