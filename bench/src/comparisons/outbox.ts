import amqplib from 'amqplib'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { KyselyOutboxStore, createOutboxTableSql } from '@acemq/store-kysely'
import { runInChild } from '../internal/child.js'
import { AMQP_URL, DATABASE_URL, QUICK } from '../internal/config.js'
import { openAceMq } from '../internal/contestants.js'
import { ORIGIN } from '../internal/messages.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { check, cpuPerMessage, rates, row, type ProfileResult } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'

const VARIANTS = ['acemq', 'handwritten'] as const
type Variant = (typeof VARIANTS)[number]

/** Records per round, records relayed first as a warm-up, and the batch both relays use. */
const SIZES = QUICK
  ? { count: 1_000, warmup: 200, batch: 100 }
  : { count: 20_000, warmup: 2_000, batch: 100 }

/** Two outbox tables (warm-up, measured) filled with records for one queue. */
interface OutboxParams {
  readonly warmupTable: string
  readonly table: string
  readonly queue: string
  readonly warmup: number
  readonly count: number
  readonly batch: number
}

function database(max = 4): Kysely<Record<string, never>> {
  return new Kysely({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max }) }),
  })
}

/**
 * An outbox table with `count` records to `queue`, as `KyselyOutboxStore.add` writes them (the
 * same columns, a ~300-byte JSON order as the body), inserted in one statement.
 */
async function fillTable(
  db: Kysely<Record<string, never>>,
  table: string,
  queue: string,
  count: number,
): Promise<void> {
  await sql.raw(createOutboxTableSql({ table })).execute(db)
  await sql`
    insert into ${sql.table(table)} (id, exchange, routing_key, content_type, body, headers, envelope, created_at, attempts)
    select 'order-' || n, '', ${queue}, 'application/json',
      convert_to(json_build_object('id', 'order-' || n, 'customer', 'customer-' || (n % 997),
        'lines', json_build_array(json_build_object('sku', 'sku-' || (n % 113), 'quantity', 1 + n % 5, 'price', 9.99)),
        'note', repeat('x', 160))::text, 'UTF8'),
      '{"x-tenant":"acme"}', '{}', floor(extract(epoch from clock_timestamp()) * 1000)::bigint + n, 0
    from generate_series(1, ${count}) as n`.execute(db)
}

/** `mq.outbox(new KyselyOutboxStore(db)).drainOnce()`: leased batches, confirms, marks. */
const relayWithAceMq: Worker = async (params, { profile }) => {
  const p = params as OutboxParams
  const db = database()
  const mq = await openAceMq('outbox relay')
  try {
    const relay = (table: string): Promise<number> =>
      mq.outbox(new KyselyOutboxStore(db, { table }), { batch: p.batch }).drainOnce()
    if ((await relay(p.warmupTable)) !== p.warmup) throw new Error('the warm-up was not relayed')
    collectGarbage()
    return await measured(profile, async () => {
      const started = performance.now()
      const published = await relay(p.table)
      const ms = performance.now() - started
      if (published !== p.count) throw new Error(`@acemq relayed ${published} of ${p.count}`)
      return ms
    })
  } finally {
    await mq.close()
    await db.destroy()
  }
}

interface Row {
  readonly id: string
  readonly exchange: string
  readonly routing_key: string
  readonly content_type: string
  readonly body: Buffer
  readonly headers: string
  readonly envelope: string
  readonly created_at: string
}

/**
 * What the relay writes for a record: its application headers, then the envelope headers an
 * `@acemq` consumer reads (docs/design.md §4) — the record's id, its routing key as the type,
 * its creation time as first seen — the same header bytes as `@acemq`'s relay publishes, set
 * on the parsed object as a careful hand-written relay would.
 */
function relayHeaders(r: Row): Record<string, unknown> {
  const envelope = JSON.parse(r.envelope) as { type?: string; correlation?: string }
  const headers = JSON.parse(r.headers) as Record<string, unknown>
  headers['x-acemq-id'] = r.id
  headers['x-acemq-type'] = envelope.type ?? r.routing_key
  headers['x-acemq-version'] = { '!': 'int', value: 1 }
  headers['x-acemq-correlation'] = envelope.correlation ?? r.id
  headers['x-acemq-attempt'] = { '!': 'int', value: 1 }
  headers['x-acemq-first-seen'] = { '!': 'long', value: Number(r.created_at) }
  headers['x-acemq-origin'] = ORIGIN
  return headers
}

/**
 * The relay by hand: select a batch of unpublished rows, publish each on a confirm channel
 * (persistent, mandatory, the id as message id, the envelope headers), wait for the confirms,
 * update the batch as published; until a batch comes back short. No lease: one relay alone.
 */
async function relayByHand(
  pool: pg.Pool,
  channel: amqplib.ConfirmChannel,
  table: string,
  batch: number,
): Promise<number> {
  let published = 0
  for (;;) {
    const { rows } = await pool.query<Row>(
      `select id, exchange, routing_key, content_type, body, headers, envelope, created_at from "${table}" where published_at is null order by created_at, id limit $1`,
      [batch],
    )
    for (const r of rows) {
      channel.publish(r.exchange, r.routing_key, r.body, {
        persistent: true,
        mandatory: true,
        contentType: r.content_type,
        messageId: r.id,
        headers: relayHeaders(r),
      })
    }
    await channel.waitForConfirms()
    if (rows.length > 0) {
      await pool.query(
        `update "${table}" set published_at = $1 where id = any($2) and published_at is null`,
        [Date.now(), rows.map((r) => r.id)],
      )
      published += rows.length
    }
    if (rows.length < batch) return published
  }
}

const relayWithAmqplib: Worker = async (params, { profile }) => {
  const p = params as OutboxParams
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 })
  // Nagle off, as the transport has it (and as the ordered comparison's raw side): the
  // comparison is of the relays, not of their sockets' defaults.
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: 'acemq-bench outbox by hand' },
    noDelay: true,
  })
  try {
    const channel = await model.createConfirmChannel()
    if ((await relayByHand(pool, channel, p.warmupTable, p.batch)) !== p.warmup) {
      throw new Error('the warm-up was not relayed')
    }
    collectGarbage()
    return await measured(profile, async () => {
      const started = performance.now()
      const published = await relayByHand(pool, channel, p.table, p.batch)
      const ms = performance.now() - started
      if (published !== p.count) throw new Error(`the hand-written relay relayed ${published}`)
      return ms
    })
  } finally {
    await model.close()
    await pool.end()
  }
}

const WORKERS: Record<Variant, Worker> = { acemq: relayWithAceMq, handwritten: relayWithAmqplib }

async function measure(context: RunContext, variant: Variant, profile?: string): Promise<Measured> {
  const { admin } = context
  const queue = await admin.queue(`outbox-${variant}`)
  const db = database(2)
  const stamp = `${process.pid}_${Date.now().toString(36)}`
  const warmupTable = `bench_outbox_warm_${stamp}`
  const table = `bench_outbox_${stamp}`
  try {
    await fillTable(db, warmupTable, queue, SIZES.warmup)
    await fillTable(db, table, queue, SIZES.count)
    const result = await runInChild<Measured>({
      worker: `outbox:${variant}`,
      params: {
        warmupTable,
        table,
        queue,
        warmup: SIZES.warmup,
        count: SIZES.count,
        batch: SIZES.batch,
      } satisfies OutboxParams,
      ...(profile !== undefined && { profile }),
    })
    const depth = await admin.depth(queue)
    if (depth !== SIZES.warmup + SIZES.count) {
      throw new Error(`${variant}: the queue holds ${depth}, not ${SIZES.warmup + SIZES.count}`)
    }
    return result
  } finally {
    await sql`drop table if exists ${sql.table(table)}`.execute(db)
    await sql`drop table if exists ${sql.table(warmupTable)}`.execute(db)
    await db.destroy()
    await admin.remove(queue)
  }
}

export const outbox: Comparison = {
  id: 'outbox',
  title: '6. Outbox relay on Postgres, batches of 100',
  workers: Object.fromEntries(VARIANTS.map((v) => [`outbox:${v}`, WORKERS[v]])),

  async run(context) {
    const { sizes, log } = context
    const { count } = SIZES
    const runs = await interleave({
      name: 'outbox',
      variants: VARIANTS,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: (variant) => measure(context, variant),
      recover: context.recover,
    })
    const perSecond = { acemq: rates(runs.acemq, count), hand: rates(runs.handwritten, count) }
    const cpu = {
      acemq: cpuPerMessage(runs.acemq, count),
      hand: cpuPerMessage(runs.handwritten, count),
    }
    const target = check(
      '@acemq outbox relay throughput vs a hand-written relay',
      '@acemq records/s ÷ hand-written records/s, per round',
      perRound(perSecond.acemq, perSecond.hand, div),
      '>=',
      0.9,
    )
    const profiles: ProfileResult[] = []
    if (shouldProfile(context, target.met)) {
      profiles.push(
        await profileRun(
          context,
          'outbox-acemq',
          `@acemq relaying ${count} records`,
          count,
          (file) => measure(context, 'acemq', file),
        ),
        await profileRun(
          context,
          'outbox-handwritten',
          `the hand-written relay, ${count} records (the reference)`,
          count,
          (file) => measure(context, 'handwritten', file),
        ),
      )
    }
    return {
      id: 'outbox',
      title: this.title,
      sections: [
        {
          title: `${count.toLocaleString('en-US')} records`,
          setup: [
            `An outbox table on the local Postgres (the DDL of \`createOutboxTableSql\`) holding ${count.toLocaleString('en-US')} records of a ~300-byte JSON order for one queue, inserted before the run; ${SIZES.warmup.toLocaleString('en-US')} more in a warm-up table relayed first in the same process.`,
            `\`@acemq\`: \`mq.outbox(new KyselyOutboxStore(db), { batch: ${SIZES.batch} }).drainOnce()\` — leased batches (\`UPDATE … FOR UPDATE SKIP LOCKED … RETURNING\`), confirmed mandatory publishes with the full envelope, one \`UPDATE\` marking each batch. Hand-written: \`SELECT … LIMIT ${SIZES.batch}\`, \`publish\` each on an amqplib confirm channel with the same headers (the record's, then the envelope's), \`waitForConfirms()\`, one \`UPDATE … WHERE id = ANY($1)\`; no lease (one relay alone).`,
            "Timed from the first claim to the last mark, both with a pg pool of 4 connections and Nagle's algorithm off (`noDelay`, the transport's default). The tables are not analyzed: a backlog just written, before autovacuum has seen it.",
          ],
          rows: [
            row('@acemq', 'records/s', perSecond.acemq),
            row('hand-written', 'records/s', perSecond.hand),
            row('@acemq ÷ hand-written', '×', perRound(perSecond.acemq, perSecond.hand, div), true),
            row('@acemq CPU', 'µs/record', cpu.acemq),
            row('hand-written CPU', 'µs/record', cpu.hand),
            row('@acemq CPU ÷ hand-written CPU', '×', perRound(cpu.acemq, cpu.hand, div), true),
          ],
          checks: [target],
          notes: [],
        },
      ],
      profiles,
    }
  },
}
