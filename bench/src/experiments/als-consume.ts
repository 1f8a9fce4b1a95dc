// What an enabled AsyncLocalStorage costs a consumer on Node 20, measured without @acemq: the
// same hand-written amqplib consumer (prefetch 100, one at a time, an in-memory idempotency
// claim + confirm per message, so a few promises per message), with and without each message
// handled inside als.run() — which is what @acemq's consumer does around every handler
// (ace-mq.ts #currentTask, consumer.ts #runHandler). Each run in a fresh process, interleaved.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/als-consume.ts
import { AsyncLocalStorage } from 'node:async_hooks'
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { InMemoryIdempotencyStore } from '@acemq/core'
import type { Worker } from '../comparisons/comparison.js'
import { withWarmupAndMain } from '../comparisons/comparison.js'
import { Admin } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { QUICK } from '../internal/config.js'
import { Countdown, limitedConsumer, openRaw } from '../internal/contestants.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { interleave } from '../internal/rounds.js'
import { fmt, median } from '../internal/stats.js'

const VARIANTS = ['plain', 'als'] as const
type Variant = (typeof VARIANTS)[number]

interface Params {
  readonly variant: Variant
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
}

const drain: Worker = async (params) => {
  const p = params as Params
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

async function main(): Promise<void> {
  const rounds = QUICK ? 2 : 7
  const count = QUICK ? 1_000 : 20_000
  const warmup = QUICK ? 300 : 3_000
  const admin = await Admin.open()
  try {
    const runs = await interleave({
      name: 'als',
      variants: VARIANTS,
      rounds,
      unit: 'ms',
      log: (line) => console.log(line),
      recover: () => admin.waitForBroker(),
      measure: (variant) =>
        withWarmupAndMain(admin, `als-${variant}`, warmup, count, (warmupQueue, queue) =>
          runInChild<Measured>({
            worker: 'experiment:als-consume',
            params: { variant, warmupQueue, warmup, queue, count } satisfies Params,
          }),
        ),
    })
    const cpu = (v: Variant): number[] => runs[v].map((r) => (r.cpuMs * 1000) / count)
    const ratios = cpu('als').map((x, i) => x / (cpu('plain')[i] as number))
    console.log(`\nCPU µs/msg: plain ${fmt(median(cpu('plain')))}, als ${fmt(median(cpu('als')))}`)
    console.log(
      `als ÷ plain per round: ${ratios.map((r) => fmt(r)).join(', ')}; median ${fmt(median(ratios))}`,
    )
    if (!QUICK) {
      const file = fileURLToPath(new URL('../../results/als-consume.json', import.meta.url))
      const result = { plain: cpu('plain'), als: cpu('als'), ratios }
      fs.writeFileSync(
        file,
        `${JSON.stringify({ generatedAt: new Date().toISOString(), rounds, count, cpuUsPerMessage: result }, null, 2)}\n`,
      )
      console.log(`wrote ${file}`)
    }
  } finally {
    await admin.close()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
