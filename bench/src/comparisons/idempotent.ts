import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Database } from '../internal/sqlite.js'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { ConsumerOptions, InMemoryIdempotencyStore, type IdempotencyStore } from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { SqliteIdempotencyStore } from '@acemq/store-sqlite'
import { runInChild } from '../internal/child.js'
import { DATABASE_URL } from '../internal/config.js'
import {
  Countdown,
  drainAceMq,
  limitedConsumer,
  openAceMq,
  openRaw,
} from '../internal/contestants.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import {
  check,
  cpuPerMessage,
  row,
  wallPerMessage,
  type ProfileResult,
  type Section,
} from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound, sum } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  withWarmupAndMain,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'
import { drainWithAmqplib, type DrainParams } from './consume.js'

const STORES = ['memory', 'sqlite', 'postgres'] as const
export type StoreKind = (typeof STORES)[number]

const VARIANTS = ['acemq', 'amqplib', 'store', 'inline'] as const
type Variant = (typeof VARIANTS)[number]

/** Where a store keeps its rows: a SQLite file or a Postgres table, made fresh for each run. */
export interface StoreParams {
  readonly store: StoreKind
  readonly concurrency: number
  readonly sqlitePath?: string
  readonly table?: string
}

interface IdempotentParams extends DrainParams, StoreParams {}

interface StoreHandle {
  readonly store: IdempotencyStore
  close(): Promise<void>
}

export function pgPool(concurrency: number): pg.Pool {
  return new pg.Pool({ connectionString: DATABASE_URL, max: concurrency })
}

export async function openStore(p: StoreParams): Promise<StoreHandle> {
  switch (p.store) {
    case 'memory':
      return { store: InMemoryIdempotencyStore.forOneDay(), close: async () => undefined }
    case 'sqlite': {
      const store = new SqliteIdempotencyStore(p.sqlitePath as string)
      return { store, close: () => store.close() }
    }
    case 'postgres': {
      const db = new Kysely<Record<string, never>>({
        dialect: new PostgresDialect({ pool: pgPool(p.concurrency) }),
      })
      const store = new KyselyIdempotencyStore(db, { table: p.table as string })
      return {
        store,
        close: async () => {
          await store.close()
          await db.destroy()
        },
      }
    }
  }
}

/** `@acemq` consumer with `.idempotent(store)`, prefetch 100, a handler that does nothing. */
const consumeIdempotently: Worker = async (params, { profile }) => {
  const p = params as IdempotentParams
  const { store, close } = await openStore(p)
  const mq = await openAceMq(`idempotent ${p.store}`)
  try {
    const options = ConsumerOptions.defaults()
      .withPrefetch(100)
      .withConcurrency(p.concurrency)
      .idempotent(store)
    await drainAceMq(mq, p.warmupQueue, p.warmup, options)
    collectGarbage()
    return await measured(profile, () => drainAceMq(mq, p.queue, p.count, options))
  } finally {
    await mq.close()
    await close()
  }
}

interface RawStoreParams extends StoreParams {
  readonly warmup: number
  readonly count: number
}

/** Runs `step(id)` for every id, `concurrency` at a time; returns ms. */
export async function timedIds(
  ids: readonly string[],
  concurrency: number,
  step: (id: string) => Promise<void> | void,
): Promise<number> {
  const started = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < ids.length) await step(ids[next++] as string)
    }),
  )
  return performance.now() - started
}

/** A store's claim + confirm for one id, done by hand. */
interface Statements {
  step(id: string): Promise<void> | void
  close(): Promise<void>
}

/**
 * The floor of a store: its claim and confirm statements, by hand. In memory: the store's own
 * `tryClaim` + `confirm`. SQLite: a prepared `INSERT … ON CONFLICT (id) DO NOTHING` and
 * `UPDATE … SET confirmed = 1` through better-sqlite3 on a WAL file like the store's. Postgres:
 * the same two statements through a `pg` pool of `concurrency`.
 */
export function openStatements(p: StoreParams): Statements {
  switch (p.store) {
    case 'memory': {
      const store = InMemoryIdempotencyStore.forOneDay()
      return {
        step: async (id) => {
          await store.tryClaim(id)
          await store.confirm(id)
        },
        close: async () => undefined,
      }
    }
    case 'sqlite': {
      const db = new Database(p.sqlitePath as string, { timeout: 5_000 })
      db.pragma('journal_mode = WAL')
      const insert = db.prepare(
        'INSERT INTO "acemq_idempotency" (id, owner, claimed_at, confirmed, confirmed_at) VALUES (?, ?, ?, 0, NULL) ON CONFLICT (id) DO NOTHING',
      )
      const confirm = db.prepare(
        'UPDATE "acemq_idempotency" SET confirmed = 1, confirmed_at = ? WHERE id = ?',
      )
      return {
        step: (id) => {
          insert.run(id, randomUUID(), Date.now())
          confirm.run(Date.now(), id)
        },
        close: async () => {
          db.close()
        },
      }
    }
    case 'postgres': {
      const pool = pgPool(p.concurrency)
      const t = `"${p.table as string}"`
      const insert = `insert into ${t} (id, owner, claimed_at, confirmed, confirmed_at) values ($1, $2, $3, false, null) on conflict (id) do nothing`
      const confirm = `update ${t} set confirmed = true, confirmed_at = $1 where id = $2`
      return {
        step: async (id) => {
          await pool.query(insert, [id, randomUUID(), Date.now()])
          await pool.query(confirm, [Date.now(), id])
        },
        close: () => pool.end(),
      }
    }
  }
}

/** The store's statements driven directly, no broker: `concurrency` ids at a time. */
const driveStoreStatements: Worker = async (params, { profile }) => {
  const p = params as RawStoreParams
  const warm = Array.from({ length: p.warmup }, () => randomUUID())
  const ids = Array.from({ length: p.count }, () => randomUUID())
  const statements = openStatements(p)
  try {
    await timedIds(warm, p.concurrency, (id) => statements.step(id))
    collectGarbage()
    return await measured(profile, () => timedIds(ids, p.concurrency, (id) => statements.step(id)))
  } finally {
    await statements.close()
  }
}

/**
 * A hand-written idempotent consumer: amqplib (prefetch 100, `concurrency` at a time) running
 * the store's statements for each message before its ack — the same work as `@acemq`'s, on the
 * same machine at the same time, minus the library.
 */
const consumeWithInlineStatements: Worker = async (params, { profile }) => {
  const p = params as IdempotentParams
  const raw = await openRaw(`inline ${p.store}`)
  const statements = openStatements(p)
  const drain = async (queue: string, count: number): Promise<number> => {
    const countdown = new Countdown(count)
    const { consumerTag } = await limitedConsumer(
      raw.channel,
      queue,
      100,
      p.concurrency,
      async (channel, message) => {
        JSON.parse(message.content.toString('utf8'))
        await statements.step(String(message.properties.messageId))
        channel.ack(message)
        countdown.tick()
      },
    )
    const ms = await countdown.done
    await raw.channel.cancel(consumerTag)
    return ms
  }
  try {
    await drain(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(profile, () => drain(p.queue, p.count))
  } finally {
    await raw.model.close()
    await statements.close()
  }
}

let serial = 0

/** A fresh SQLite file or Postgres table for one run, removed afterwards. */
export async function withStorage<T>(
  client: pg.Client,
  store: StoreKind,
  fn: (p: Omit<StoreParams, 'concurrency'>) => Promise<T>,
): Promise<T> {
  const name = `acemq_bench_${process.pid}_${++serial}`
  if (store === 'memory') return fn({ store })
  if (store === 'sqlite') {
    const sqlitePath = path.join(os.tmpdir(), `${name}.db`)
    const db = new Database(sqlitePath)
    db.pragma('journal_mode = WAL')
    db.exec(SqliteIdempotencyStore.createTableSql())
    db.close()
    try {
      return await fn({ store, sqlitePath })
    } finally {
      for (const suffix of ['', '-wal', '-shm'])
        fs.rmSync(`${sqlitePath}${suffix}`, { force: true })
    }
  }
  await client.query(createTableSql({ table: name, dialect: 'postgres' }))
  try {
    return await fn({ store, table: name })
  } finally {
    await client.query(`drop table if exists "${name}"`)
  }
}

function sizeFor(context: RunContext, store: StoreKind): number {
  const { sizes } = context
  return store === 'memory'
    ? sizes.idempotentMemory
    : store === 'sqlite'
      ? sizes.idempotentSqlite
      : sizes.idempotentPostgres
}

function concurrencyFor(context: RunContext, store: StoreKind): number {
  return store === 'postgres' ? context.sizes.postgresConcurrency : 1
}

async function measure(
  context: RunContext,
  client: pg.Client,
  store: StoreKind,
  variant: Variant,
  count: number,
  profile?: string,
): Promise<Measured> {
  const { admin, sizes } = context
  const concurrency = concurrencyFor(context, store)
  const extra = profile === undefined ? {} : { profile }
  if (variant === 'amqplib') {
    return withWarmupAndMain(
      admin,
      `idem-${store}-raw`,
      sizes.warmup,
      count,
      (warmupQueue, queue) =>
        runInChild<Measured>({
          worker: 'idempotent:amqplib',
          params: { warmupQueue, warmup: sizes.warmup, queue, count } satisfies DrainParams,
          ...extra,
        }),
    )
  }
  return withStorage(client, store, (storage) => {
    if (variant === 'store') {
      return runInChild<Measured>({
        worker: 'idempotent:store',
        params: { ...storage, concurrency, warmup: sizes.warmup, count } satisfies RawStoreParams,
        ...extra,
      })
    }
    return withWarmupAndMain(
      admin,
      `idem-${store}-${variant}`,
      sizes.warmup,
      count,
      (warmupQueue, queue) =>
        runInChild<Measured>({
          worker: `idempotent:${variant}`,
          params: {
            ...storage,
            concurrency,
            warmupQueue,
            warmup: sizes.warmup,
            queue,
            count,
          } satisfies IdempotentParams,
          ...extra,
        }),
    )
  })
}

const STORE_LABEL: Record<StoreKind, string> = {
  memory: 'in-memory (`InMemoryIdempotencyStore.forOneDay()`)',
  sqlite: 'SQLite file (`SqliteIdempotencyStore`, WAL)',
  postgres: 'Kysely + Postgres (`KyselyIdempotencyStore`, `pg` pool)',
}

export const idempotent: Comparison = {
  id: 'idempotent',
  title: '3. Idempotent consume, per store',
  workers: {
    'idempotent:acemq': consumeIdempotently,
    'idempotent:amqplib': drainWithAmqplib,
    'idempotent:store': driveStoreStatements,
    'idempotent:inline': consumeWithInlineStatements,
  },

  async run(context) {
    const { sizes, log } = context
    const client = new pg.Client(DATABASE_URL)
    await client.connect()
    const sections: Section[] = []
    const profiles: ProfileResult[] = []
    try {
      for (const store of STORES) {
        const count = sizeFor(context, store)
        const concurrency = concurrencyFor(context, store)
        const runs = await interleave({
          name: `idempotent/${store}`,
          variants: VARIANTS,
          rounds: sizes.rounds,
          unit: 'ms',
          log,
          measure: (variant) => measure(context, client, store, variant, count),
          recover: context.recover,
        })
        const us = {
          acemq: wallPerMessage(runs.acemq, count),
          amqplib: wallPerMessage(runs.amqplib, count),
          store: wallPerMessage(runs.store, count),
          inline: wallPerMessage(runs.inline, count),
        }
        const cpu = {
          acemq: cpuPerMessage(runs.acemq, count),
          floor: perRound(
            cpuPerMessage(runs.amqplib, count),
            cpuPerMessage(runs.store, count),
            sum,
          ),
          inline: cpuPerMessage(runs.inline, count),
        }
        const floor = perRound(us.amqplib, us.store, sum)
        const target = check(
          `@acemq idempotent consume on ${store} vs raw consume + raw store`,
          '@acemq µs/msg ÷ (amqplib µs/msg + store statements µs/msg), per round',
          perRound(us.acemq, floor, (a, b) => a / b),
          '<=',
          // Issue 21 asks Postgres for at most 1.1 × the hand-written consumer; the others keep
          // the first wave's 1.25.
          store === 'postgres' ? 1.1 : 1.25,
        )
        const checks = [target]
        if (store === 'postgres') {
          // Issue 21's wording: against the hand-written claim + confirm consumer itself.
          checks.push(
            check(
              '@acemq idempotent consume on postgres vs the hand-written consumer running the statements inline',
              '@acemq µs/msg ÷ inline µs/msg, per round',
              perRound(us.acemq, us.inline, div),
              '<=',
              1.1,
            ),
          )
        }
        if (
          shouldProfile(
            context,
            checks.every((c) => c.met),
          )
        ) {
          const n = Math.min(sizes.profile, count * 2)
          profiles.push(
            await profileRun(
              context,
              `idempotent-${store}-acemq`,
              `@acemq idempotent consumer on ${store}, ${n} messages`,
              n,
              (file) => measure(context, client, store, 'acemq', n, file),
            ),
            await profileRun(
              context,
              `idempotent-${store}-inline`,
              `amqplib consumer running the ${store} statements inline, ${n} messages (the reference)`,
              n,
              (file) => measure(context, client, store, 'inline', n, file),
            ),
          )
        }
        sections.push({
          title: STORE_LABEL[store],
          setup: [
            `${count.toLocaleString('en-US')} messages (unique ids) per run, after ${sizes.warmup.toLocaleString('en-US')} to warm up; a fresh queue and a fresh ${store === 'memory' ? 'store' : store === 'sqlite' ? 'database file' : 'table'} per run.`,
            `\`@acemq\`: \`ConsumerOptions.defaults().withPrefetch(100).withConcurrency(${concurrency}).idempotent(store)\`, a handler that does nothing (claim, handle, confirm, ack).`,
            store === 'memory'
              ? "Store statements: the same store's `tryClaim(id)` + `confirm(id)`, awaited one after the other."
              : store === 'sqlite'
                ? "Store statements: a prepared `INSERT … ON CONFLICT (id) DO NOTHING` and `UPDATE … SET confirmed = 1` per id through better-sqlite3 on a WAL file (the store's table and pragmas)."
                : `Store statements: the same \`INSERT … ON CONFLICT (id) DO NOTHING\` and \`UPDATE … SET confirmed = true\` per id through a \`pg\` pool of ${concurrency}, ${concurrency} ids at a time (the store gets the same pool size through Kysely).`,
            'Raw consume: amqplib, `prefetch(100)`, `JSON.parse`, ack (as in comparison 1).',
            `Inline (${store === 'postgres' ? 'the second check' : 'not part of the target, for context'}): an amqplib consumer, prefetch 100, ${concurrency} at a time, running the same store statements for each message before its ack — the hand-written equivalent, with the broker, the database and the consumer busy at the same time as they are for \`@acemq\`.`,
          ],
          rows: [
            row('@acemq consumer + store', 'µs/msg', us.acemq),
            row('amqplib consume (raw)', 'µs/msg', us.amqplib),
            row('store statements (raw)', 'µs/msg', us.store),
            row('raw consume + raw store', 'µs/msg', floor, true),
            row('amqplib consumer running the statements inline', 'µs/msg', us.inline),
            row('@acemq ÷ inline', '×', perRound(us.acemq, us.inline, div), true),
            row('@acemq CPU', 'µs/msg', cpu.acemq),
            row('raw consume + raw store CPU', 'µs/msg', cpu.floor, true),
            row('inline CPU', 'µs/msg', cpu.inline),
          ],
          checks,
          notes: [],
        })
      }
    } finally {
      await client.end()
    }
    return { id: 'idempotent', title: this.title, sections, profiles }
  },
}
