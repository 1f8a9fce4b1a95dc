// What an enabled AsyncLocalStorage costs a consumer on Node 20, measured first without @acemq: the
// same hand-written amqplib consumer (prefetch 100, one at a time, an in-memory idempotency
// claim + confirm per message, so a few promises per message), with and without each message
// handled inside als.run() — which is what @acemq's consumer does around every handler
// (ace-mq.ts #currentTask, consumer.ts #runHandler). A third variant is @acemq itself on the
// same work (an idempotent consumer, the same store, prefetch 100, one at a time), so that
// acemq ÷ als is what the engine costs beyond the AsyncLocalStorage; and @acemq once more with
// Nagle's algorithm on (socketOptions.noDelay: false), for what TCP_NODELAY costs the acks. Each
// run in a fresh process, interleaved.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/als-consume.ts
import { AsyncLocalStorage } from 'node:async_hooks'
import { ConsumerOptions, InMemoryIdempotencyStore } from '@acemq/core'
import type { Worker } from '../comparisons/comparison.js'
import { QUICK } from '../internal/config.js'
import {
  Countdown,
  drainAceMq,
  limitedConsumer,
  openAceMq,
  openRaw,
} from '../internal/contestants.js'
import { collectGarbage, measured } from '../internal/profiler.js'
import { fmt, median } from '../internal/stats.js'
import { interleaveConsumers, runWhenMain, writeResult, type ConsumeParams } from './experiment.js'

const VARIANTS = ['plain', 'als', 'acemq', 'acemq-nagle'] as const
type Variant = (typeof VARIANTS)[number]

const drainWithAceMq: Worker = async (params) => {
  const p = params as ConsumeParams<Variant>
  const mq = await openAceMq('als experiment', { nagle: p.variant === 'acemq-nagle' })
  const options = ConsumerOptions.defaults()
    .withPrefetch(100)
    .withConcurrency(1)
    .idempotent(InMemoryIdempotencyStore.forOneDay())
  try {
    await drainAceMq(mq, p.warmupQueue, p.warmup, options)
    collectGarbage()
    return await measured(undefined, () => drainAceMq(mq, p.queue, p.count, options))
  } finally {
    await mq.close()
  }
}

const drain: Worker = async (params, context) => {
  const p = params as ConsumeParams<Variant>
  if (p.variant === 'acemq' || p.variant === 'acemq-nagle') return drainWithAceMq(params, context)
  const raw = await openRaw('als experiment')
  const store = InMemoryIdempotencyStore.forOneDay()
  const als = new AsyncLocalStorage<string>()
  const run = async (queue: string, count: number): Promise<number> => {
    const countdown = new Countdown(count)
    const work = async (id: string): Promise<void> => {
      await store.tryClaim(id)
      await store.confirm(id)
    }
    const { consumerTag } = await limitedConsumer(
      raw.channel,
      queue,
      100,
      1,
      async (channel, message) => {
        JSON.parse(message.content.toString('utf8'))
        const id = String(message.properties.messageId)
        if (p.variant === 'als') await als.run(id, () => work(id))
        else await work(id)
        channel.ack(message)
        countdown.tick()
      },
    )
    const ms = await countdown.done
    await raw.channel.cancel(consumerTag)
    return ms
  }
  try {
    await run(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(undefined, () => run(p.queue, p.count))
  } finally {
    await raw.model.close()
  }
}

export const workers: Readonly<Record<string, Worker>> = { 'experiment:als-consume': drain }

runWhenMain(import.meta.url, async () => {
  const rounds = QUICK ? 2 : 7
  const count = QUICK ? 1_000 : 20_000
  const cpu = await interleaveConsumers({
    name: 'als',
    worker: 'experiment:als-consume',
    variants: VARIANTS,
    rounds,
    count,
    warmup: QUICK ? 300 : 3_000,
  })
  const ratios = cpu.als.map((x, i) => x / (cpu.plain[i] as number))
  const engine = cpu.acemq.map((x, i) => x / (cpu.als[i] as number))
  const nagle = cpu['acemq-nagle'].map((x, i) => x / (cpu.acemq[i] as number))
  console.log(
    `\nCPU µs/msg: plain ${fmt(median(cpu.plain))}, als ${fmt(median(cpu.als))}, acemq ${fmt(median(cpu.acemq))}, acemq-nagle ${fmt(median(cpu['acemq-nagle']))}`,
  )
  console.log(
    `als ÷ plain per round: ${ratios.map((r) => fmt(r)).join(', ')}; median ${fmt(median(ratios))}`,
  )
  console.log(
    `acemq ÷ als per round: ${engine.map((r) => fmt(r)).join(', ')}; median ${fmt(median(engine))}`,
  )
  console.log(
    `acemq-nagle ÷ acemq per round: ${nagle.map((r) => fmt(r)).join(', ')}; median ${fmt(median(nagle))}`,
  )
  writeResult('als-consume', { rounds, count, cpuUsPerMessage: { ...cpu, ratios, engine, nagle } })
})
