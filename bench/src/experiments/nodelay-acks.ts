// What Nagle's algorithm being off (`noDelay`, the transport's default since the close-latency
// fix) costs a consumer in CPU, measured without @acemq: raw amqplib draining pre-filled queues,
// prefetch 100, one JSON.parse + ack per message, with the socket's default (Nagle on), with
// noDelay, and with noDelay plus the socket corked around each pass of amqplib's frame
// multiplexer (so the acks of one pass would leave in one write). Each run in a fresh process,
// interleaved.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/nodelay-acks.ts
import amqplib from 'amqplib'
import type { Worker } from '../comparisons/comparison.js'
import { AMQP_URL, QUICK } from '../internal/config.js'
import { drainRaw } from '../internal/contestants.js'
import { collectGarbage, measured } from '../internal/profiler.js'
import { fmt, median } from '../internal/stats.js'
import { interleaveConsumers, runWhenMain, writeResult, type ConsumeParams } from './experiment.js'

const VARIANTS = ['nagle', 'nodelay', 'corked'] as const
type Variant = (typeof VARIANTS)[number]

/** amqplib's private socket and frame multiplexer (2.x), for the corked variant only. */
interface Internals {
  readonly stream: { cork(): void; uncork(): void }
  readonly muxer: { _readIncoming(): void }
}

const drain: Worker = async (params) => {
  const p = params as ConsumeParams<Variant>
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: `acemq-bench nodelay ${p.variant}` },
    noDelay: p.variant !== 'nagle',
  })
  if (p.variant === 'corked') {
    const { stream, muxer } = model.connection as unknown as Internals
    const pass = muxer._readIncoming.bind(muxer)
    muxer._readIncoming = () => {
      stream.cork()
      try {
        pass()
      } finally {
        stream.uncork()
      }
    }
  }
  const raw = { model, channel: await model.createChannel() }
  try {
    await drainRaw(raw, p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(undefined, () => drainRaw(raw, p.queue, p.count))
  } finally {
    await model.close()
  }
}

export const workers: Readonly<Record<string, Worker>> = { 'experiment:nodelay-acks': drain }

runWhenMain(import.meta.url, async () => {
  const rounds = QUICK ? 2 : 7
  const count = QUICK ? 1_000 : 20_000
  const cpu = await interleaveConsumers({
    name: 'nodelay',
    worker: 'experiment:nodelay-acks',
    variants: VARIANTS,
    rounds,
    count,
    warmup: QUICK ? 300 : 3_000,
  })
  console.log(`\nCPU µs/msg: ${VARIANTS.map((v) => `${v} ${fmt(median(cpu[v]))}`).join(', ')}`)
  writeResult('nodelay-acks', { rounds, count, cpuUsPerMessage: cpu })
})
