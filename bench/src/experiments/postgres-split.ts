// Where @acemq's extra CPU on Kysely + Postgres goes, inside the consumer (the store-overhead
// experiment measures the stores without the broker): 4,000 messages, prefetch 100,
// concurrency 20, a pg pool of 20, three ways, round-robin in one process (the first round
// warms the JIT up and is not a result):
//   kysely   @acemq with KyselyIdempotencyStore (claim + confirm)
//   rawpg    @acemq with a store that runs the floor's two statements straight on the pg pool
//   inline   a hand-written amqplib consumer running the same two statements
// Printed: CPU µs per message per round. To see what the AsyncLocalStorage around each handler
// costs, run it again with `this.#host.currentTask.run(task, …)` in consumer.ts#runHandler
// replaced by a direct call (BENCHMARKS.md, finding 2).
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/postgres-split.ts
import { randomUUID } from 'node:crypto'
import amqplib from 'amqplib'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { ConsumerOptions, type ClaimResult } from '@acemq/core'
import { type ClaimingIdempotencyStore } from '@acemq/core/spi'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { AMQP_URL as URL, DATABASE_URL as DB } from '../internal/config.js'
import { limitedConsumer } from '../internal/contestants.js'
import { acemqShapedMessage } from '../internal/messages.js'

const N = 4000
async function fill(q: string): Promise<void> {
  const c = await amqplib.connect(URL)
  const ch = await c.createConfirmChannel()
  await ch.assertQueue(q, { durable: true })
  for (let i = 0; i < N; i++) {
    const m = acemqShapedMessage(i, q)
    ch.publish('', q, m.content, m.options)
    if (i % 1000 === 999) await ch.waitForConfirms()
  }
  await ch.waitForConfirms()
  await c.close()
}
/** The floor's statements as a store: a new id is claimed, anything else is a duplicate. */
class RawPgStore {
  constructor(
    readonly pool: pg.Pool,
    readonly t: string,
  ) {}
  async tryClaim(id: string): Promise<ClaimResult> {
    const r = await this.pool.query(
      `insert into ${this.t} (id, owner, claimed_at, confirmed, confirmed_at) values ($1, $2, $3, false, null) on conflict (id) do nothing`,
      [id, randomUUID(), Date.now()],
    )
    return r.rowCount === 1 ? 'claimed' : 'duplicate'
  }
  async claim(id: string): Promise<boolean> {
    return (await this.tryClaim(id)) === 'claimed'
  }
  async confirm(id: string): Promise<void> {
    await this.pool.query(
      `update ${this.t} set confirmed = true, confirmed_at = $1 where id = $2`,
      [Date.now(), id],
    )
  }
  async release(): Promise<void> {}
  async isConfirmed(): Promise<boolean> {
    return false
  }
}
async function run(variant: 'kysely' | 'rawpg' | 'inline'): Promise<number> {
  const q = `tmp-pg-${process.pid}-${variant}-${Math.random().toString(36).slice(2)}`
  const t = `tmp_pg_${Math.random().toString(36).slice(2, 10)}`
  const admin = new pg.Client(DB)
  await admin.connect()
  await admin.query(createTableSql({ table: t }))
  await admin.end()
  await fill(q)
  const pool = new pg.Pool({ connectionString: DB, max: 20 })
  const db = new Kysely<object>({ dialect: new PostgresDialect({ pool }) })
  let n = 0
  let done!: () => void
  const finished = new Promise<void>((r) => (done = r))
  let close: () => Promise<void>
  const t0 = process.cpuUsage()
  if (variant === 'inline') {
    const c = await amqplib.connect(URL)
    const ch = await c.createChannel()
    const raw = new RawPgStore(pool, t)
    await limitedConsumer(ch, q, 100, 20, async (channel, m) => {
      JSON.parse(m.content.toString('utf8'))
      const id = String(m.properties.messageId)
      await raw.tryClaim(id)
      await raw.confirm(id)
      channel.ack(m)
      if (++n === N) done()
    })
    close = () => c.close()
  } else {
    const mq = await connect(URL)
    const store: ClaimingIdempotencyStore =
      variant === 'kysely'
        ? new KyselyIdempotencyStore(db, { table: t, purgeEvery: 0 })
        : new RawPgStore(pool, t)
    await mq.consume(
      q,
      ConsumerOptions.defaults().withPrefetch(100).withConcurrency(20).idempotent(store),
      async () => {
        if (++n === N) done()
      },
    )
    close = () => mq.close()
  }
  await finished
  const c = process.cpuUsage(t0)
  await close()
  await db.destroy()
  const a = await amqplib.connect(URL)
  const ch = await a.createChannel()
  await ch.deleteQueue(q)
  await a.close()
  const admin2 = new pg.Client(DB)
  await admin2.connect()
  await admin2.query(`drop table ${t}`)
  await admin2.end()
  return (c.user + c.system) / N
}
const results: Record<string, number[]> = {}
for (let r = 0; r < 5; r++) {
  for (const v of ['kysely', 'rawpg', 'inline'] as const) (results[v] ??= []).push(await run(v))
}
for (const [k, v] of Object.entries(results)) console.log(k, v.map((x) => x.toFixed(0)).join(' '))
