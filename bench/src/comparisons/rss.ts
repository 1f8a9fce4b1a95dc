import { ConsumerOptions } from '@acemq/core'
import { renderChart } from '../curves/svg.js'
import { withBrokerLock } from '../internal/broker-lock.js'
import { runInChild } from '../internal/child.js'
import { openAceMq } from '../internal/contestants.js'
import { collectGarbage } from '../internal/profiler.js'
import { check, type Section } from '../internal/results.js'
import { fmt, slope } from '../internal/stats.js'
import type { Comparison, RunContext, Worker } from './comparison.js'

// Issue 32: the resident memory of one @acemq consumer over 1,000,000 messages (comparison 4
// measured 200,000), sampled after GC, in a table and drawn in benchmarks/rss.svg.

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

interface MemoryParams {
  readonly queue: string
  readonly total: number
  readonly every: number
}

interface MemorySample {
  readonly messages: number
  readonly rssMb: number
  readonly heapUsedMb: number
}

function sample(messages: number): MemorySample {
  collectGarbage()
  const { rss, heapUsed } = process.memoryUsage()
  return { messages, rssMb: rss / 2 ** 20, heapUsedMb: heapUsed / 2 ** 20 }
}

/** `@acemq` consumer (prefetch 100, handler does nothing) through `total` messages, sampling memory after GC. */
const memoryWithAceMq: Worker = async (params, { progress }) => {
  const p = params as MemoryParams
  const mq = await openAceMq('memory')
  const samples: MemorySample[] = []
  let handled = 0
  let finished!: () => void
  const done = new Promise<void>((resolve) => (finished = resolve))
  const baseline = sample(0)
  const consumer = await mq.consume(p.queue, ConsumerOptions.defaults().withPrefetch(100), () => {
    handled++
    // Sampled on the next turn, outside the handler, so the engine is between messages.
    if (handled % p.every === 0) {
      const at = handled
      setImmediate(() => {
        samples.push(sample(at))
        if (at === p.total) finished()
      })
    }
  })
  progress('subscribed')
  await done
  await consumer.close()
  await sleep(200)
  const final = sample(handled)
  await mq.close()
  return { baseline, samples, final }
}

async function memorySection(
  context: RunContext,
): Promise<{ section: Section; points: MemorySample[] }> {
  const { sizes, log, admin } = context
  const { rssTotal: total, rssEvery: every } = sizes
  const queue = await admin.queue('memory')
  log(`  memory: ${total.toLocaleString('en-US')} messages through an @acemq consumer …`)
  const started = Date.now()
  let filling: Promise<void> | undefined
  const result = await runInChild<{
    baseline: MemorySample
    samples: MemorySample[]
    final: MemorySample
  }>(
    { worker: 'memory:acemq', params: { queue, total, every } satisfies MemoryParams },
    {
      timeoutMs: 600_000,
      // Publish while it consumes, so the broker never holds all of them at once.
      onProgress: () => {
        filling = admin.fill(queue, total)
      },
    },
  ).finally(async () => {
    await filling
    await admin.remove(queue)
  })
  const { baseline, samples, final } = result
  // The second sample: JIT and buffers have settled by then.
  const at40k = samples.find((s) => s.messages === every * 2) ?? samples[1] ?? final
  const last = samples[samples.length - 1] ?? final
  const flat = check(
    'RSS stays flat',
    `RSS at ${last.messages.toLocaleString('en-US')} ÷ RSS at ${at40k.messages.toLocaleString('en-US')} messages (after GC)`,
    [last.rssMb / at40k.rssMb],
    '<=',
    1.2,
  )
  const later = samples.filter((s) => s.messages >= at40k.messages)
  const rssSlope = slope(
    later.map((s) => s.messages / 100_000),
    later.map((s) => s.rssMb),
  )
  const heapSlope = slope(
    later.map((s) => s.messages / 100_000),
    later.map((s) => s.heapUsedMb),
  )
  log(
    `  memory: done in ${((Date.now() - started) / 1000).toFixed(1)} s; RSS ${fmt(baseline.rssMb)} → ${fmt(final.rssMb)} MB`,
  )
  const points = [baseline, ...samples, final]
  const section: Section = {
    title: `Resident memory over ${total.toLocaleString('en-US')} messages`,
    setup: [
      `One \`@acemq\` consumer (prefetch 100, a handler that does nothing) in a child process started with \`--expose-gc\`; the parent publishes ${total.toLocaleString('en-US')} messages while it consumes.`,
      `Memory is sampled after a full GC: before the first message (baseline), every ${every.toLocaleString('en-US')} messages, and after the consumer is closed (final).`,
      'Flat means no growth trend: the RSS at the last sample is at most 1.2 × the RSS at the second (JIT and buffers have settled by then).',
      'Chart: [benchmarks/rss.svg](benchmarks/rss.svg), stamped with the commit and the load average of the run.',
    ],
    rows: [],
    table: {
      header: ['sample', 'messages', 'RSS (MB)', 'heap used (MB)'],
      rows: points.map((s, i) => [
        i === 0 ? 'baseline' : i === points.length - 1 ? 'final (closed)' : `${i}`,
        s.messages.toLocaleString('en-US'),
        fmt(s.rssMb),
        fmt(s.heapUsedMb),
      ]),
    },
    checks: [flat],
    notes: [
      `Trend from ${at40k.messages.toLocaleString('en-US')} messages on: RSS ${fmt(rssSlope)} MB and heap ${fmt(heapSlope)} MB per 100,000 messages (least squares).`,
    ],
  }
  return { section, points }
}

export const rss: Comparison = {
  id: 'rss',
  title: '12. Resident memory over 1,000,000 messages',
  workers: { 'memory:acemq': memoryWithAceMq },

  async run(context) {
    const { section, points } = await withBrokerLock(() => memorySection(context), context.log)
    context.writeChart(
      'rss.svg',
      renderChart({
        title: `RSS and heap of one @acemq consumer over ${context.sizes.rssTotal.toLocaleString('en-US')} messages (after GC)`,
        xLabel: 'messages consumed',
        stamp: context.stamp(),
        panels: [
          {
            yLabel: 'MiB',
            series: [
              { name: 'RSS', points: points.map((s) => [s.messages, s.rssMb]) },
              {
                name: 'heap used',
                points: points.map((s) => [s.messages, s.heapUsedMb]),
                dashed: true,
              },
            ],
          },
        ],
      }),
    )
    return { id: 'rss', title: this.title, sections: [section], profiles: [] }
  },
}
