// Which half of `@acemq` a latency gap comes from (issue 32): one point of comparison 9 (a
// handler kind at an offered rate) run four ways, interleaved, each in a fresh process — raw
// amqplib publishing and consuming, `@acemq` doing both, and the two split runs (`@acemq`
// publishing to a raw consumer, raw amqplib publishing to an `@acemq` consumer). A gap that
// follows the publisher is the publish path's; one that follows the consumer, the consume path's.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source \
//        src/experiments/latency-split.ts io@5000 [rounds] [seconds]
// BENCH_PROFILE=1 also profiles each of the four once (results/profiles/latency-split-*).
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { measure, type Contestant } from '../comparisons/latency.js'
import { Admin } from '../internal/broker.js'
import { summarizeProfile } from '../internal/profile-summary.js'
import { interleave } from '../internal/rounds.js'
import { fmt, median } from '../internal/stats.js'
import { runWhenMain, writeResult } from './experiment.js'

const ALL: readonly Contestant[] = ['amqplib', 'acemq', 'acemq-publisher', 'acemq-consumer']
/** `BENCH_SPLIT=acemq-consumer` runs raw amqplib and only the contestants listed. */
const CONTESTANTS: readonly Contestant[] =
  process.env['BENCH_SPLIT'] === undefined
    ? ALL
    : [
        'amqplib',
        ...ALL.filter((c) => c !== 'amqplib' && process.env['BENCH_SPLIT']?.split(',').includes(c)),
      ]

runWhenMain(import.meta.url, async () => {
  const point = process.argv[2] ?? 'io@5000'
  // The store's point needs an idempotency table per run, which only `pnpm bench` sets up.
  if (!/^(async|io)@\d+$/.test(point))
    throw new Error(`latency-split: point must look like io@5000 (async or io), got '${point}'`)
  const rounds = Number(process.argv[3] ?? 5)
  const seconds = Number(process.argv[4] ?? 4)
  const admin = await Admin.open()
  try {
    const runs = await interleave({
      name: `latency-split ${point}`,
      variants: CONTESTANTS,
      rounds,
      unit: 'ms p99',
      log: (line) => console.log(line),
      recover: () => admin.waitForBroker(),
      measure: (c) => measure({ admin }, undefined, `${point}:${c}`, seconds),
    })
    const rows = CONTESTANTS.map((c) => {
      const ms = runs[c]
      const pick = (f: (m: (typeof ms)[number]) => number): number => median(ms.map(f))
      const ratios = ms.map((m, i) => m.p99 / (runs.amqplib[i]?.p99 ?? Number.NaN))
      return {
        contestant: c,
        p50: pick((m) => m.p50),
        p99: pick((m) => m.p99),
        p999: pick((m) => m.p999),
        cpuUs: pick((m) => m.cpuUsPerMessage),
        p99VsRaw: median(ratios),
        p99VsRawRounds: ratios,
        lagP99: pick((m) => m.stages.lagP99),
        transitP50: pick((m) => m.stages.transitP50),
        transitP99: pick((m) => m.stages.transitP99),
        handlerP99: pick((m) => m.stages.handlerP99),
        loopDelayP99: pick((m) => m.stages.loopDelayP99),
        loopDelayMax: pick((m) => m.stages.loopDelayMax),
        gcMs: pick((m) => m.stages.gcMs),
        gcMaxMs: pick((m) => m.stages.gcMaxMs),
        gcMajorMs: pick((m) => m.stages.gcMajorMs),
        rounds: ms.map((m) => ({ p99: m.p99, ...m.stages })),
      }
    })
    console.log(`\n${point}, ${rounds} rounds of ${seconds} s, medians:`)
    console.log('contestant        p50     p99   p99.9  CPU µs/msg  p99 ÷ raw p99 (rounds)')
    for (const r of rows)
      console.log(
        `${r.contestant.padEnd(16)} ${fmt(r.p50).padStart(6)} ${fmt(r.p99).padStart(7)} ${fmt(r.p999).padStart(7)} ${fmt(r.cpuUs).padStart(10)}  ${fmt(r.p99VsRaw)} (${r.p99VsRawRounds.map((x) => fmt(x)).join(', ')})`,
      )
    console.log(
      '\nstages (medians, ms): lag p99 · transit p50 / p99 · handler p99 · loop delay p99 / max · GC total / longest',
    )
    for (const r of rows)
      console.log(
        `${r.contestant.padEnd(16)} ${fmt(r.lagP99)} · ${fmt(r.transitP50)} / ${fmt(r.transitP99)} · ${fmt(r.handlerP99)} · ${fmt(r.loopDelayP99)} / ${fmt(r.loopDelayMax)} · ${fmt(r.gcMs)} / ${fmt(r.gcMaxMs)} / ${fmt(r.gcMajorMs)}`,
      )
    const profiles: Record<string, unknown> = {}
    if (process.env['BENCH_PROFILE'] === '1') {
      const dir = fileURLToPath(new URL('../../results/profiles/', import.meta.url))
      fs.mkdirSync(dir, { recursive: true })
      for (const c of CONTESTANTS) {
        const file = path.join(dir, `latency-split-${point.replace('@', '-')}-${c}.cpuprofile`)
        await measure({ admin }, undefined, `${point}:${c}`, seconds, file)
        profiles[c] = summarizeProfile(file)
        console.log(`profiled ${c}: ${file}`)
      }
    }
    writeResult(`latency-split-${point.replace('@', '-')}`, {
      point,
      rounds,
      seconds,
      rows,
      profiles,
    })
  } finally {
    await admin.close()
  }
})
