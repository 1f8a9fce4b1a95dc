// What a delivered message allocates (issue 32): the latency split found `@acemq`'s consumer
// spending about twice raw amqplib's time in garbage collection at the same rate, and its
// longest pauses longer. This drains a pre-filled queue with an awaiting handler (prefetch 100)
// under V8's sampling heap profiler, counting objects already collected by the minor and major
// GCs too, and sums the sampled bytes per function, mapped to the TypeScript sources; raw
// amqplib drains the same bytes in its own process beside it.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/consume-alloc.ts
import inspector from 'node:inspector'
import type { Worker } from '../comparisons/comparison.js'
import { withWarmupAndMain } from '../comparisons/comparison.js'
import { Admin } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { QUICK } from '../internal/config.js'
import {
  awaitingHandler,
  drainAceMq,
  drainRaw,
  openAceMq,
  openRaw,
} from '../internal/contestants.js'
import { collectGarbage, mapFrameToSource, post } from '../internal/profiler.js'
import { fmt } from '../internal/stats.js'
import { runWhenMain, writeResult, type ConsumeParams } from './experiment.js'
import { ConsumerOptions } from '@acemq/core'

const VARIANTS = ['amqplib', 'acemq'] as const
type Variant = (typeof VARIANTS)[number]

interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  selfSize: number
  children: SamplingNode[]
}

interface Allocation {
  readonly bytesPerMessage: number
  /** The functions that allocated the most, bytes per message, largest first. */
  readonly top: readonly { readonly frame: string; readonly bytesPerMessage: number }[]
}

/** `function file:line` of a sampled frame, at its TypeScript source when it has one. */
function where(frame: SamplingNode['callFrame']): string {
  const at = { ...frame }
  const url = mapFrameToSource(at)
  const file = url.replace(/^.*\/(packages|node_modules)\//, '$1/').replace(/^file:\/\//, '')
  return `${frame.functionName || '(anonymous)'} ${file}:${at.lineNumber + 1}`
}

/** Drains the warm-up queue, then the measured one under the sampling heap profiler, on one connection. */
const drain: Worker = async (params) => {
  const p = params as ConsumeParams<Variant>
  const opened =
    p.variant === 'acemq'
      ? await openAceMq('alloc').then((mq) => ({
          run: (queue: string, count: number) =>
            drainAceMq(
              mq,
              queue,
              count,
              ConsumerOptions.defaults().withPrefetch(100),
              awaitingHandler,
            ),
          close: () => mq.close(),
        }))
      : await openRaw('alloc').then((raw) => ({
          run: (queue: string, count: number) => drainRaw(raw, queue, count, 100, true),
          close: () => raw.model.close(),
        }))
  const session = new inspector.Session()
  try {
    await opened.run(p.warmupQueue, p.warmup)
    collectGarbage()
    session.connect()
    await post(session, 'HeapProfiler.enable')
    await post(session, 'HeapProfiler.startSampling', {
      samplingInterval: 512,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    })
    await opened.run(p.queue, p.count)
    const { profile } = await post<{ profile: { head: SamplingNode } }>(
      session,
      'HeapProfiler.stopSampling',
    )
    const byFrame = new Map<string, number>()
    let total = 0
    const visit = (node: SamplingNode): void => {
      if (node.selfSize > 0) {
        const key = where(node.callFrame)
        byFrame.set(key, (byFrame.get(key) ?? 0) + node.selfSize)
        total += node.selfSize
      }
      for (const child of node.children) visit(child)
    }
    visit(profile.head)
    const top = [...byFrame]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([frame, bytes]) => ({ frame, bytesPerMessage: bytes / p.count }))
    return { ms: 0, bytesPerMessage: total / p.count, top } satisfies Allocation & { ms: number }
  } finally {
    session.disconnect()
    await opened.close()
  }
}

export const workers: Readonly<Record<string, Worker>> = { 'experiment:consume-alloc': drain }

runWhenMain(import.meta.url, async () => {
  const count = QUICK ? 2_000 : 20_000
  const admin = await Admin.open()
  const results: Record<string, Allocation> = {}
  try {
    for (const variant of VARIANTS) {
      results[variant] = await withWarmupAndMain(
        admin,
        `alloc-${variant}`,
        2_000,
        count,
        (warmupQueue, queue) =>
          runInChild<Allocation>({
            worker: 'experiment:consume-alloc',
            params: {
              variant,
              warmupQueue,
              warmup: 2_000,
              queue,
              count,
            } satisfies ConsumeParams<Variant>,
          }),
      )
    }
  } finally {
    await admin.close()
  }
  for (const variant of VARIANTS) {
    const r = results[variant] as Allocation
    console.log(`\n${variant}: ${fmt(r.bytesPerMessage)} bytes allocated per message (sampled)`)
    for (const t of r.top) console.log(`  ${fmt(t.bytesPerMessage).padStart(7)}  ${t.frame}`)
  }
  writeResult('consume-alloc', { count, results })
})
