// How many promises each message makes: with an AsyncLocalStorage enabled (as @acemq's consumer
// has, around every handler), Node 20 runs promise hooks for each one, so on this Node the count
// is a cost in itself. Unlike time, the count does not move with the machine's load.
//   consume    raw amqplib (async handler, ack) against @acemq (prefetch 100, concurrency 20)
//              draining the same kind of queue, counted after a warm-up
//   in-memory  @acemq with and without InMemoryIdempotencyStore, on the RabbitMQ transport
//   store      one claim + confirm: KyselyIdempotencyStore (Postgres) against the same two
//              statements straight on a pg pool
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/promise-count.ts
import { createHook } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import { ConsumerOptions, InMemoryIdempotencyStore, Topology } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import amqp from 'amqplib'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AMQP_URL, DATABASE_URL, QUICK } from '../internal/config.js'
import { runWhenMain, writeResult } from './experiment.js'

const WARMUP = 200
const COUNT = QUICK ? 500 : 3_000

/** Counts the promises created while `counting` is on. */
class PromiseCounter {
  count = 0
  readonly #hook = createHook({
    init: (_id, type) => {
      if (type === 'PROMISE') this.count++
    },
  })
  start(): void {
    this.count = 0
    this.#hook.enable()
  }
  stop(): number {
    this.#hook.disable()
    return this.count
  }
}

/** A callback that starts counting after the warm-up and resolves `done` at the last message. */
function progress(counter: PromiseCounter): { seen(): void; done: Promise<number> } {
  let seen = 0
  let finish!: (count: number) => void
  const done = new Promise<number>((resolve) => (finish = resolve))
  return {
    seen() {
      seen++
      if (seen === WARMUP) counter.start()
      if (seen === WARMUP + COUNT) finish(counter.stop() / COUNT)
    },
    done,
  }
}

async function rawAmqplib(counter: PromiseCounter): Promise<number> {
  const connection = await amqp.connect(AMQP_URL)
  try {
    const queue = `bench.promises.raw.${randomUUID()}`
    const publish = await connection.createConfirmChannel()
    await publish.assertQueue(queue, { durable: false })
    for (let i = 0; i < WARMUP + COUNT; i++) {
      publish.sendToQueue(queue, Buffer.from(JSON.stringify({ n: i })), {
        contentType: 'application/json',
        messageId: String(i),
      })
    }
    await publish.waitForConfirms()
    const consume = await connection.createChannel()
    await consume.prefetch(100)
    const { seen, done } = progress(counter)
    await consume.consume(queue, async (message) => {
      if (message === null) return
      JSON.parse(message.content.toString())
      await Promise.resolve()
      consume.ack(message)
      seen()
    })
    const perMessage = await done
    await publish.deleteQueue(queue)
    return perMessage
  } finally {
    await connection.close()
  }
}

async function acemq(counter: PromiseCounter, withStore: boolean): Promise<number> {
  const mq = await connect(AMQP_URL)
  const queue = `bench.promises.acemq.${randomUUID()}`
  try {
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    await mq
      .publisher<{ n: number }>('', queue)
      .sendAll(Array.from({ length: WARMUP + COUNT }, (_, n) => ({ n })))
    const { seen, done } = progress(counter)
    let options = ConsumerOptions.defaults().withPrefetch(100).withConcurrency(20)
    if (withStore) options = options.idempotent(InMemoryIdempotencyStore.forOneDay())
    await mq.consume<{ n: number }>(queue, options, async () => {
      seen()
    })
    return await done
  } finally {
    await mq.close()
    const connection = await amqp.connect(AMQP_URL)
    const channel = await connection.createChannel()
    for (const name of [queue, `${queue}.dlq`, `${queue}.parked`]) await channel.deleteQueue(name)
    await connection.close()
  }
}

async function stores(counter: PromiseCounter): Promise<{ kysely: number; pg: number }> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 })
  const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
  const table = `bench_promises_${process.pid}`
  const store = new KyselyIdempotencyStore(db, { table })
  await sql.raw(store.createTableSql()).execute(db)
  try {
    const ids = (n: number): string[] => Array.from({ length: n }, () => randomUUID())
    const viaStore = async (list: string[]): Promise<void> => {
      for (const id of list) {
        await store.tryClaim(id)
        await store.confirm(id)
      }
    }
    const insert = `insert into "${table}" (id, owner, claimed_at, confirmed, confirmed_at) values ($1, $2, $3, false, null) on conflict (id) do nothing`
    const confirm = `update "${table}" set confirmed = true, confirmed_at = $1 where id = $2`
    const viaPg = async (list: string[]): Promise<void> => {
      for (const id of list) {
        await pool.query(insert, [id, randomUUID(), Date.now()])
        await pool.query(confirm, [Date.now(), id])
      }
    }
    const per = async (run: (list: string[]) => Promise<void>): Promise<number> => {
      await run(ids(WARMUP))
      const list = ids(COUNT)
      counter.start()
      await run(list)
      return counter.stop() / COUNT
    }
    return { kysely: await per(viaStore), pg: await per(viaPg) }
  } finally {
    await store.close()
    await sql.raw(`drop table "${table}"`).execute(db)
    await db.destroy()
  }
}

async function main(): Promise<void> {
  const counter = new PromiseCounter()
  const result = {
    consume: {
      amqplib: await rawAmqplib(counter),
      acemq: await acemq(counter, false),
      acemqInMemoryStore: await acemq(counter, true),
    },
    claimAndConfirm: await stores(counter),
  }
  console.log('\n| promises per message | count |')
  console.log('|---|--:|')
  console.log(`| raw amqplib consume | ${result.consume.amqplib.toFixed(1)} |`)
  console.log(`| @acemq consume | ${result.consume.acemq.toFixed(1)} |`)
  console.log(
    `| @acemq consume, in-memory store | ${result.consume.acemqInMemoryStore.toFixed(1)} |`,
  )
  console.log(
    `| claim + confirm, KyselyIdempotencyStore | ${result.claimAndConfirm.kysely.toFixed(1)} |`,
  )
  console.log(`| claim + confirm, the statements on pg | ${result.claimAndConfirm.pg.toFixed(1)} |`)
  writeResult('promise-count', { warmup: WARMUP, count: COUNT, result })
}

runWhenMain(import.meta.url, main)
