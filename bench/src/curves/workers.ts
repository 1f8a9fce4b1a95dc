// The child side of `pnpm bench:curves`: each worker runs in a fresh process (see
// internal/child.ts) and reports what it measured. The parent side is curves.ts.
import { setTimeout as sleep } from 'node:timers/promises'
import { ConsumerOptions, type Handler } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import type { Channel, ConsumeMessage } from 'amqplib'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import type { Worker } from '../comparisons/comparison.js'
import { DATABASE_URL } from '../internal/config.js'
import {
  Countdown,
  drainAceMq,
  drainRaw,
  limitedConsumer,
  openAceMq,
  openRaw,
} from '../internal/contestants.js'
import { collectGarbage, measured } from '../internal/profiler.js'

/** One point of a consume curve. */
export interface ConsumeParams {
  readonly variant: 'acemq' | 'amqplib'
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
  readonly prefetch: number
  readonly concurrency: number
  /** Each handler waits this long (simulated I/O); 0 is a handler that returns at once. */
  readonly handlerMs: number
}

function aceMqHandler(handlerMs: number): (countdown: Countdown) => Handler<unknown> {
  return (countdown) =>
    handlerMs === 0
      ? () => countdown.tick()
      : async () => {
          await sleep(handlerMs)
          countdown.tick()
        }
}

/** The same by hand: `JSON.parse`, the wait, ack; at most `concurrency` at once. */
async function drainRawLimited(
  channel: Channel,
  queue: string,
  count: number,
  prefetch: number,
  concurrency: number,
  handlerMs: number,
): Promise<number> {
  const countdown = new Countdown(count)
  await channel.prefetch(prefetch, false)
  const { consumerTag } = await limitedConsumer(
    channel,
    queue,
    prefetch,
    concurrency,
    async (ch: Channel, message: ConsumeMessage) => {
      JSON.parse(message.content.toString('utf8'))
      await sleep(handlerMs)
      ch.ack(message)
      countdown.tick()
    },
  )
  const ms = await countdown.done
  await channel.cancel(consumerTag)
  return ms
}

const consume: Worker = async (params) => {
  const p = params as ConsumeParams
  if (p.variant === 'acemq') {
    const mq = await openAceMq('curves')
    const options = ConsumerOptions.defaults()
      .withPrefetch(p.prefetch)
      .withConcurrency(p.concurrency)
    try {
      await drainAceMq(mq, p.warmupQueue, p.warmup, options, aceMqHandler(p.handlerMs))
      collectGarbage()
      return await measured(undefined, () =>
        drainAceMq(mq, p.queue, p.count, options, aceMqHandler(p.handlerMs)),
      )
    } finally {
      await mq.close()
    }
  }
  const raw = await openRaw('curves')
  const drain = (queue: string, count: number): Promise<number> =>
    p.handlerMs === 0 && p.concurrency === 1
      ? drainRaw(raw, queue, count, p.prefetch)
      : drainRawLimited(raw.channel, queue, count, p.prefetch, p.concurrency, p.handlerMs)
  try {
    await drain(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(undefined, () => drain(p.queue, p.count))
  } finally {
    await raw.model.close()
  }
}

/** Many consumers on one connection: what each costs in memory and CPU. */
export interface ConsumersParams {
  readonly variant: 'acemq' | 'amqplib'
  readonly queues: readonly string[]
  /** Messages waiting in each queue, drained once every consumer is subscribed. */
  readonly perQueue: number
}

export interface ConsumersResult {
  /** RSS and heap growth per consumer (after GC), bytes. */
  readonly rssPerConsumer: number
  readonly heapPerConsumer: number
  /** CPU per consumer to subscribe and drain its messages, ms. */
  readonly cpuMsPerConsumer: number
}

function memory(): { rss: number; heap: number } {
  collectGarbage()
  const { rss, heapUsed } = process.memoryUsage()
  return { rss, heap: heapUsed }
}

const consumers: Worker = async (params) => {
  const p = params as ConsumersParams
  const total = p.queues.length * p.perQueue
  const countdown = new Countdown(total)
  // The connection is open before the baseline: what is measured is the consumers alone.
  if (p.variant === 'acemq') {
    const mq = await openAceMq('curves consumers')
    const options = ConsumerOptions.defaults().withPrefetch(10)
    const before = memory()
    const cpu = process.cpuUsage()
    for (const queue of p.queues) await mq.consume(queue, options, () => countdown.tick())
    return perConsumer(p.queues.length, before, cpu, countdown, () => mq.close())
  }
  const raw = await openRaw('curves consumers')
  const before = memory()
  const cpu = process.cpuUsage()
  for (const queue of p.queues) {
    const channel = await raw.model.createChannel()
    await channel.prefetch(10, false)
    await channel.consume(queue, (message) => {
      if (message === null) return
      JSON.parse(message.content.toString('utf8'))
      channel.ack(message)
      countdown.tick()
    })
  }
  return perConsumer(p.queues.length, before, cpu, countdown, () => raw.model.close())
}

/** Once every message is handled: growth and CPU since the baseline, per consumer. */
async function perConsumer(
  n: number,
  before: { rss: number; heap: number },
  cpu: NodeJS.CpuUsage,
  countdown: Countdown,
  close: () => Promise<void>,
): Promise<ConsumersResult> {
  await countdown.done
  const used = process.cpuUsage(cpu)
  const after = memory()
  await close()
  return {
    rssPerConsumer: (after.rss - before.rss) / n,
    heapPerConsumer: (after.heap - before.heap) / n,
    cpuMsPerConsumer: (used.user + used.system) / 1000 / n,
  }
}

/** Claim + confirm latency of the Kysely store on Postgres with `rows` rows already there. */
export interface ClaimParams {
  readonly table: string
  readonly claims: number
}

export interface ClaimResultPoint {
  readonly p50Ms: number
  readonly p99Ms: number
  /** One purgeExpired() (a batch of at most 1,000 expired rows), ms. */
  readonly purgeMs: number
}

const claims: Worker = async (params) => {
  const p = params as ClaimParams
  const db = new Kysely<Record<string, never>>({
    dialect: new PostgresDialect({
      pool: new pg.Pool({ connectionString: DATABASE_URL, max: 2 }),
    }),
  })
  // purgeEvery 0: no purge in the background while claims are timed.
  const store = new KyselyIdempotencyStore(db, { table: p.table, purgeEvery: 0 })
  try {
    const latencies: number[] = []
    for (let i = 0; i < p.claims + 200; i++) {
      const id = `curve-${process.pid}-${i}`
      const started = performance.now()
      await store.tryClaim(id)
      await store.confirm(id)
      // The first 200 warm the pool, the statements and the JIT.
      if (i >= 200) latencies.push(performance.now() - started)
    }
    latencies.sort((a, b) => a - b)
    const at = (q: number): number => latencies[Math.floor(q * (latencies.length - 1))] ?? 0
    const started = performance.now()
    await store.purgeExpired()
    return {
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      purgeMs: performance.now() - started,
    } satisfies ClaimResultPoint
  } finally {
    await store.close()
    await db.destroy()
  }
}

export const workers: Readonly<Record<string, Worker>> = {
  'curve:consume': consume,
  'curve:consumers': consumers,
  'curve:claims': claims,
}
