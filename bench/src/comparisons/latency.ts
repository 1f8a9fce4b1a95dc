import os from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { ConsumerOptions } from '@acemq/core'
import { withBrokerLock } from '../internal/broker-lock.js'
import { runInChild } from '../internal/child.js'
import { AMQP_URL, DATABASE_URL, QUICK } from '../internal/config.js'
import { pidListeningOn, portOf } from '../internal/proc-cpu.js'
import { latencyFindings, type LatencyPoint } from '../internal/findings.js'
import {
  latencyRun,
  sides,
  type HandlerKind,
  type LatencyParams,
  type LatencyResult,
  type SideName,
  type Work,
} from '../internal/latency-run.js'
import { profiled } from '../internal/profiler.js'
import { check, row, type Check, type ProfileResult, type Section } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { fmt, median, perRound, div } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'
import { openStatements, openStore, withStorage } from './idempotent.js'

// Issue 32: end-to-end latency at fixed offered rates, raw amqplib (Nagle off, an ack per
// message) against @acemq, each publishing and consuming in one process; p50 / p99 / p99.9 from
// an HDR histogram of (received − due) per message.

const SIDES = ['amqplib', 'acemq'] as const
/** The most missed points a run profiles (each both sides, ~10 s apiece). */
const PROFILED_POINTS = 4
/**
 * Who publishes and who consumes: one side for both, or a split run — `acemq-publisher` (`@acemq`
 * publishes, raw amqplib consumes) and `acemq-consumer` (the other way round) — which tells
 * which half of the library a latency gap comes from.
 */
export type Contestant = SideName | 'acemq-publisher' | 'acemq-consumer'

function halves(c: Contestant): { side: SideName; publisher: SideName } {
  if (c === 'acemq-publisher') return { side: 'amqplib', publisher: 'acemq' }
  if (c === 'acemq-consumer') return { side: 'acemq', publisher: 'amqplib' }
  return { side: c, publisher: c }
}

interface Kind {
  readonly kind: HandlerKind
  readonly title: string
  /** Handlers at once: the library's `withConcurrency`, the raw consumer's limit. */
  readonly concurrency: number
  /** Whether it runs at the highest rate too (the store and the 1 ms handler stop at 10k/s). */
  readonly atMax: boolean
  readonly describe: string
}

const KINDS: readonly Kind[] = [
  {
    kind: 'async',
    title: 'Async handler',
    concurrency: 1,
    atMax: true,
    describe:
      'a handler that awaits a resolved promise; `@acemq` at its default concurrency 1, amqplib running each delivery as it comes (at most the prefetch, 100, at once)',
  },
  {
    kind: 'io',
    title: 'Handler awaiting 1 ms of I/O',
    concurrency: 100,
    atMax: false,
    describe:
      'a handler that awaits a 1 ms timer (`setTimeout(1)` from `node:timers/promises`: a stand-in for an I/O round trip, not a real one); concurrency 100 on both sides (= the prefetch)',
  },
  {
    kind: 'pg',
    title: 'Postgres idempotency store',
    concurrency: 20,
    atMax: false,
    describe:
      "`@acemq` with `.idempotent(new KyselyIdempotencyStore(db))` (a `pg` pool of 20) and an awaiting handler; amqplib running the store's claim and confirm statements by hand through a `pg` pool of 20 before each ack; concurrency 20 on both sides",
  },
]

interface RunParams extends LatencyParams {
  readonly table?: string
}

const runLatency: Worker = async (params, { profile }) => {
  const p = params as RunParams
  let work: Work = () => Promise.resolve()
  let close = async (): Promise<void> => undefined
  let options = ConsumerOptions.defaults()
  if (p.handler === 'io') work = () => sleep(1)
  if (p.handler === 'pg') {
    const store = {
      store: 'postgres' as const,
      concurrency: p.concurrency,
      table: p.table as string,
    }
    if (p.side === 'acemq') {
      const opened = await openStore(store)
      options = options.idempotent(opened.store)
      close = opened.close
    } else {
      const statements = openStatements(store)
      work = async (id) => statements.step(id)
      close = () => statements.close()
    }
  }
  try {
    return await profiled(profile, () => latencyRun(p, work, sides(p, options)))
  } finally {
    await close()
  }
}

type Measured = LatencyResult & { readonly ms: number }

function variantsOf(rates: readonly number[], max: number | undefined): string[] {
  const out: string[] = []
  for (const k of KINDS) {
    const kindRates = k.atMax && max !== undefined ? [...rates, max] : rates
    for (const rate of kindRates) for (const side of SIDES) out.push(`${k.kind}@${rate}:${side}`)
  }
  return out
}

function parse(variant: string): { kind: Kind; rate: number; side: Contestant } {
  const [head, side] = variant.split(':') as [string, Contestant]
  const [kind, rate] = head.split('@') as [HandlerKind, string]
  return { kind: KINDS.find((k) => k.kind === kind) as Kind, rate: Number(rate), side }
}

/**
 * Runs one point, `<kind>@<rate>:<contestant>` (`io@5000:acemq`), in a child process on a
 * fresh queue (and a fresh idempotency table for the store); with `profile`, writes its CPU
 * profile there.
 */
export async function measure(
  context: Pick<RunContext, 'admin'>,
  client: pg.Client | undefined,
  variant: string,
  seconds: number,
  profile?: string,
): Promise<Measured> {
  const { kind, rate, side } = parse(variant)
  const brokerPid = pidListeningOn(portOf(AMQP_URL))
  const queue = await context.admin.queue(`latency-${kind.kind}-${rate}-${side}`)
  const run = async (table?: string): Promise<Measured> => {
    const params: RunParams = {
      ...halves(side),
      handler: kind.kind,
      rate,
      warmupSeconds: QUICK ? 0.5 : 1,
      seconds,
      queue,
      prefetch: 100,
      concurrency: kind.concurrency,
      drainMs: QUICK ? 3_000 : 10_000,
      ...(table !== undefined && { table }),
    }
    const result = await runInChild<LatencyResult>({
      worker: 'latency:run',
      params,
      ...(brokerPid !== undefined && { brokerPids: [brokerPid] }),
      ...(profile !== undefined && { profile }),
    })
    return { ...result, ms: result.p99 }
  }
  try {
    if (kind.kind !== 'pg') return await run()
    if (client === undefined) throw new Error(`latency: '${variant}' needs a Postgres client`)
    return await withStorage(client, 'postgres', (storage) => run(storage.table))
  } finally {
    await context.admin.remove(queue)
  }
}

/**
 * The highest offered rate raw amqplib sustains here with the async handler: up a ladder of
 * rates, 2 s each, while every message arrives, p50 stays under 25 ms (not queueing) and 95 % of
 * the rate is published; the last that passed.
 */
async function highestSustained(
  context: RunContext,
  client: pg.Client,
): Promise<number | undefined> {
  const ladder = QUICK ? [8_000, 12_000] : [12_000, 15_000, 20_000, 25_000, 30_000, 40_000, 50_000]
  let best: number | undefined
  for (const rate of ladder) {
    const r = await withBrokerLock(
      () => measure(context, client, `async@${rate}:amqplib`, QUICK ? 1 : 2),
      context.log,
    )
    const ok = r.received >= r.offered && r.p50 < 25 && r.publishedRate >= rate * 0.95
    context.log(
      `  rate search: raw amqplib at ${rate}/s: p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms, ${r.received}/${r.offered} received, published ${fmt(r.publishedRate)}/s — ${ok ? 'sustained' : 'not sustained'}`,
    )
    if (!ok) break
    best = rate
  }
  return best
}

export const latency: Comparison = {
  id: 'latency',
  title: '9. Latency at a fixed offered rate, publisher and consumer in one process',
  workers: { 'latency:run': runLatency },

  async run(context) {
    const { sizes, log } = context
    const client = new pg.Client(DATABASE_URL)
    await client.connect()
    try {
      const max = await highestSustained(context, client)
      const rates = sizes.latencyRates.filter((r) => max === undefined || r < max)
      const variants = variantsOf(rates, max)
      const rounds = Math.min(sizes.rounds, 3)
      const runs = await interleave({
        name: 'latency',
        variants,
        rounds,
        unit: 'ms p99',
        log,
        measure: (variant) => measure(context, client, variant, sizes.latencySeconds),
        recover: context.recover,
      })
      const sections: Section[] = []
      const points: LatencyPoint[] = []
      const missedAt: string[] = []
      for (const k of KINDS) {
        const kindRates = k.atMax && max !== undefined ? [...rates, max] : rates
        const checks: Check[] = []
        const tableRows: string[][] = []
        const rows = []
        for (const rate of kindRates) {
          const raw = runs[`${k.kind}@${rate}:amqplib`] as Measured[]
          const ace = runs[`${k.kind}@${rate}:acemq`] as Measured[]
          const pick = (ms: readonly Measured[], f: (m: Measured) => number): number =>
            median(ms.map(f))
          const c = check(
            `@acemq p99 vs raw amqplib p99, ${k.title.toLowerCase()}, ${rate.toLocaleString('en-US')}/s`,
            '@acemq p99 ÷ amqplib p99, per round',
            perRound(
              ace.map((m) => m.p99),
              raw.map((m) => m.p99),
              div,
            ),
            '<=',
            1.0,
          )
          checks.push(c)
          if (!c.met) missedAt.push(`${k.kind}@${rate}`)
          rows.push(
            row(
              `${rate.toLocaleString('en-US')}/s amqplib p99`,
              'ms',
              raw.map((m) => m.p99),
            ),
            row(
              `${rate.toLocaleString('en-US')}/s @acemq p99`,
              'ms',
              ace.map((m) => m.p99),
            ),
          )
          const received = (ms: readonly Measured[]): string =>
            `${fmt((100 * pick(ms, (m) => m.received)) / pick(ms, (m) => m.offered))} %`
          tableRows.push([
            `${rate.toLocaleString('en-US')}${rate === max ? ' (highest)' : ''}`,
            ...[raw, ace].flatMap((ms) => [
              `${fmt(pick(ms, (m) => m.p50))} / ${fmt(pick(ms, (m) => m.p99))} / ${fmt(pick(ms, (m) => m.p999))}`,
              received(ms),
              `${fmt(pick(ms, (m) => m.cpuUsPerMessage))} / ${fmt(pick(ms, (m) => m.processCores))} / ${fmt(pick(ms, (m) => m.brokerCores))}`,
              `${fmt(pick(ms, (m) => m.stages.transitP99))} / ${fmt(pick(ms, (m) => m.stages.loopDelayP99))} / ${fmt(pick(ms, (m) => m.stages.gcMs))}`,
            ]),
          ])
          const side = (ms: readonly Measured[]): LatencyPoint['raw'] => ({
            p50: pick(ms, (m) => m.p50),
            p99: pick(ms, (m) => m.p99),
            received: pick(ms, (m) => m.received),
            offered: pick(ms, (m) => m.offered),
            cpuUs: pick(ms, (m) => m.cpuUsPerMessage),
            processCores: pick(ms, (m) => m.processCores),
            brokerCores: pick(ms, (m) => m.brokerCores),
            machineCores: pick(ms, (m) => m.machineCores),
            stages: {
              transitP99: pick(ms, (m) => m.stages.transitP99),
              loopDelayP99: pick(ms, (m) => m.stages.loopDelayP99),
              gcMs: pick(ms, (m) => m.stages.gcMs),
            },
          })
          points.push({ kind: k.title.toLowerCase(), rate, raw: side(raw), acemq: side(ace) })
        }
        sections.push({
          title: k.title,
          setup: [
            `${k.describe}.`,
            'Each point is one process that publishes to a fresh durable classic queue at the offered rate and consumes it (prefetch 100): `@acemq` `publisher.send()` (confirmed, not awaited) and `mq.consume`; raw amqplib a confirm channel sending the same bytes (envelope headers written out) and a consumer acking each message after the handler, Nagle off (`noDelay: true`) on both of its connections (`@acemq` turns it off itself).',
            `Every message carries the time it was due (\`performance.now()\`; the publisher sends, on each ~1 ms timer turn, every message whose time has come), and the handler records now − due, in µs, in an HDR histogram (\`hdr-histogram-js\`, 3 significant digits): a publisher that falls behind shows up as latency. ${QUICK ? 0.5 : 1} s not recorded, then ${sizes.latencySeconds} s recorded; messages not received within ${QUICK ? 3 : 10} s after the last was offered are counted as having waited that long. CPU: the process's user + system time per recorded message (publisher and consumer together), and the cores it and the broker (\`beam.smp\`, from \`/proc\`) kept busy over the recorded stretch (CPU time ÷ wall time); the findings also read the whole machine's (\`/proc/stat\`), other people's work included. Where the wait went: each message's is also split at the moment it was published and the moment its handler started (one process does both), and the table gives the p99 of *transit* (published → handler started: the publish path, the broker, the consume path), the process's event-loop delay p99 (\`monitorEventLoopDelay\`, 1 ms resolution) and its garbage-collection pauses over the recorded stretch, in all (a \`gc\` PerformanceObserver).`,
            `${rounds} rounds, interleaved; the table gives the medians over rounds, the targets the median of the per-round ratios.`,
          ],
          rows,
          table: {
            header: [
              'offered msgs/s',
              'amqplib p50 / p99 / p99.9 ms',
              'amqplib received',
              'amqplib CPU µs/msg / its cores / broker cores',
              'amqplib transit p99 / loop delay p99 / GC ms',
              '@acemq p50 / p99 / p99.9 ms',
              '@acemq received',
              '@acemq CPU µs/msg / its cores / broker cores',
              '@acemq transit p99 / loop delay p99 / GC ms',
            ],
            rows: tableRows,
          },
          checks,
          notes: [],
        })
      }
      const first = sections[0]
      if (first !== undefined) {
        sections[0] = {
          ...first,
          findings: latencyFindings(points, os.availableParallelism()),
          notes: [
            max === undefined
              ? 'Highest rate: raw amqplib sustained none of the rates above 10,000/s tried (every message received, p50 under 25 ms, 95 % of the rate published, in 2 s): no higher point.'
              : `Highest rate: ${max.toLocaleString('en-US')}/s, the last rate on the ladder 12k, 15k, 20k, 25k, 30k, 40k, 50k at which raw amqplib with the async handler received every message with p50 under 25 ms (not queueing) and published at 95 % of the rate or more, in a 2 s trial before the rounds.`,
          ],
        }
      }
      const profiles: ProfileResult[] = []
      // Every missed point is profiled, both sides (at most PROFILED_POINTS of them, the async
      // handler's first); with none missed and profiling forced, the highest async rate.
      const missed = [
        ...missedAt.filter((v) => v.startsWith('async@')),
        ...missedAt.filter((v) => !v.startsWith('async@')),
      ].slice(0, PROFILED_POINTS)
      if (shouldProfile(context, missed.length === 0)) {
        const points = missed.length > 0 ? missed : [`async@${max ?? rates.at(-1) ?? 1000}`]
        for (const at of points) {
          const { kind, rate } = parse(`${at}:acemq`)
          for (const side of SIDES) {
            profiles.push(
              await profileRun(
                context,
                `latency-${at.replace('@', '-')}-${side}`,
                `${side === 'acemq' ? '@acemq' : 'raw amqplib (the reference)'}, ${kind.title.toLowerCase()} at ${rate.toLocaleString('en-US')}/s, publisher and consumer in one process (the whole run, warm-up included)`,
                rate * sizes.latencySeconds,
                (file) => measure(context, client, `${at}:${side}`, sizes.latencySeconds, file),
              ),
            )
          }
        }
      }
      return { id: 'latency', title: this.title, sections, profiles }
    } finally {
      await client.end()
    }
  },
}
