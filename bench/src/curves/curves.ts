// `pnpm bench:curves`: how cost grows, `@acemq` and raw amqplib side by side — against prefetch,
// concurrency, payload size and the number of consumers on one connection; the Kysely store's
// claim latency against the size of its table, and its purge (RSS over 1,000,000 messages is
// comparison 12 of `pnpm bench` now, src/comparisons/rss.ts). Each
// point runs in a fresh process per contestant (the two interleaved, the first one alternating),
// like `pnpm bench`. Writes results/curves.json, the charts in ../../benchmarks/*.svg, and the
// part of BENCHMARKS.md between the bench:curves markers. BENCH_QUICK=1: tiny sizes, nothing
// written but results/curves-quick.json. BENCH_CURVES=prefetch,claims: only these (the others are
// kept from the last curves.json).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { createTableSql } from '@acemq/store-kysely'
import { withWarmupAndMain } from '../comparisons/comparison.js'
import { Admin } from '../internal/broker.js'
import { withBrokerLock as brokerLock } from '../internal/broker-lock.js'
import { runInChild } from '../internal/child.js'
import { DATABASE_URL, QUICK } from '../internal/config.js'
import type { Measured } from '../internal/profiler.js'
import { fmt, median } from '../internal/stats.js'
import { renderChart, type Series } from './svg.js'
import type {
  ClaimResultPoint,
  ConsumeParams,
  ConsumersParams,
  ConsumersResult,
} from './workers.js'

const CURVES = ['prefetch', 'concurrency', 'payload', 'consumers', 'claims'] as const
type CurveId = (typeof CURVES)[number]
const VARIANTS = ['acemq', 'amqplib'] as const
type Variant = (typeof VARIANTS)[number]

/** Throughput and CPU per message of both contestants at one x. */
interface ConsumePoint {
  readonly x: number
  readonly msgsPerSec: Record<Variant, number>
  readonly cpuUsPerMessage: Record<Variant, number>
}

interface ConsumersPoint {
  readonly x: number
  readonly result: Record<Variant, ConsumersResult>
}

interface ClaimsPoint extends ClaimResultPoint {
  readonly rows: number
}

interface CurvesResult {
  readonly generatedAt: string
  readonly commit: string
  readonly load: readonly [start: number, end: number]
  readonly prefetch?: readonly ConsumePoint[]
  readonly concurrency?: readonly ConsumePoint[]
  readonly payload?: readonly ConsumePoint[]
  readonly consumers?: readonly ConsumersPoint[]
  readonly claims?: readonly ClaimsPoint[]
}

const ROUNDS = Number(process.env['BENCH_CURVES_ROUNDS'] ?? (QUICK ? 1 : 2))
const RESULTS = fileURLToPath(
  new URL(`../../results/${QUICK ? 'curves-quick' : 'curves'}.json`, import.meta.url),
)
const CHARTS = fileURLToPath(new URL('../../../benchmarks/', import.meta.url))
const BENCHMARKS_MD = fileURLToPath(new URL('../../../BENCHMARKS.md', import.meta.url))

const log = (line: string): void => console.log(`[curves] ${line}`)

/** Runs `fn` while no test injects a broker fault (the lock the test suites take). */
function withBrokerLock<T>(fn: () => Promise<T>): Promise<T> {
  return brokerLock(fn, log)
}

/** Runs one consume point: each contestant once per round, in a fresh process, interleaved. */
async function consumePoint(
  admin: Admin,
  x: number,
  point: Omit<ConsumeParams, 'variant' | 'warmupQueue' | 'queue'>,
  bytes?: number,
): Promise<ConsumePoint> {
  const runs: Record<Variant, Measured[]> = { acemq: [], amqplib: [] }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
    for (const variant of order) {
      const run = await withBrokerLock(() =>
        withWarmupAndMain(admin, `curve-${variant}`, 0, 0, async (warmupQueue, queue) => {
          await Promise.all([
            admin.fill(warmupQueue, point.warmup, bytes),
            admin.fill(queue, point.count, bytes),
          ])
          return runInChild<Measured>({
            worker: 'curve:consume',
            params: { ...point, variant, warmupQueue, queue } satisfies ConsumeParams,
          })
        }),
      )
      runs[variant].push(run)
    }
  }
  const rate = (v: Variant): number => median(runs[v].map((r) => (point.count / r.ms) * 1000))
  const cpu = (v: Variant): number => median(runs[v].map((r) => (r.cpuMs * 1000) / point.count))
  const result: ConsumePoint = {
    x,
    msgsPerSec: { acemq: rate('acemq'), amqplib: rate('amqplib') },
    cpuUsPerMessage: { acemq: cpu('acemq'), amqplib: cpu('amqplib') },
  }
  log(
    `  x=${x}: @acemq ${fmt(result.msgsPerSec.acemq)} msgs/s ${fmt(result.cpuUsPerMessage.acemq)} µs/msg, amqplib ${fmt(result.msgsPerSec.amqplib)} msgs/s ${fmt(result.cpuUsPerMessage.amqplib)} µs/msg`,
  )
  return result
}

async function prefetchCurve(admin: Admin): Promise<ConsumePoint[]> {
  const points: ConsumePoint[] = []
  for (const prefetch of QUICK ? [1, 100] : [1, 10, 100, 1000]) {
    // Prefetch 1 waits for a round trip per message: fewer of them keep the run short.
    const count = QUICK ? 500 : prefetch === 1 ? 3_000 : 10_000
    points.push(
      await consumePoint(admin, prefetch, {
        warmup: 1_000,
        count,
        prefetch,
        concurrency: 1,
        handlerMs: 0,
      }),
    )
  }
  return points
}

async function concurrencyCurve(admin: Admin): Promise<ConsumePoint[]> {
  const points: ConsumePoint[] = []
  for (const concurrency of QUICK ? [1, 16] : [1, 4, 16, 64]) {
    // A 1 ms handler (simulated I/O), so that running more of them at once matters.
    const count = QUICK ? 300 : Math.min(10_000, 1_500 * concurrency)
    points.push(
      await consumePoint(admin, concurrency, {
        warmup: 500,
        count,
        prefetch: Math.max(100, 2 * concurrency),
        concurrency,
        handlerMs: 1,
      }),
    )
  }
  return points
}

async function payloadCurve(admin: Admin): Promise<ConsumePoint[]> {
  const points: ConsumePoint[] = []
  for (const bytes of QUICK ? [100, 100_000] : [100, 1_000, 10_000, 100_000, 1_000_000]) {
    // About 50 MB per run at most, at least 100 messages.
    const count = QUICK ? 100 : Math.max(100, Math.min(10_000, Math.floor(5e7 / bytes)))
    points.push(
      await consumePoint(
        admin,
        bytes,
        { warmup: Math.min(500, count), count, prefetch: 100, concurrency: 1, handlerMs: 0 },
        bytes,
      ),
    )
  }
  return points
}

async function consumersCurve(admin: Admin): Promise<ConsumersPoint[]> {
  const points: ConsumersPoint[] = []
  const perQueue = 10
  for (const n of QUICK ? [1, 10] : [1, 10, 100, 1000]) {
    const result = {} as Record<Variant, ConsumersResult>
    for (const variant of n % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
      const queues: string[] = []
      try {
        for (let i = 0; i < n; i++) {
          const queue = await admin.queue(`curve-consumers-${variant}`)
          queues.push(queue)
          await admin.fill(queue, perQueue)
        }
        result[variant] = await withBrokerLock(() =>
          runInChild<ConsumersResult>(
            {
              worker: 'curve:consumers',
              params: { variant, queues, perQueue } satisfies ConsumersParams,
            },
            { timeoutMs: 600_000 },
          ),
        )
      } finally {
        await admin.remove(...queues)
      }
    }
    log(
      `  ${n} consumers: @acemq ${fmt(result.acemq.rssPerConsumer / 1024)} KiB RSS, ${fmt(result.acemq.cpuMsPerConsumer)} ms CPU each; amqplib ${fmt(result.amqplib.rssPerConsumer / 1024)} KiB, ${fmt(result.amqplib.cpuMsPerConsumer)} ms`,
    )
    points.push({ x: n, result })
  }
  return points
}

/** Rows in the table before the claims are timed; half of them confirmed long ago (expired). */
async function claimsCurve(): Promise<ClaimsPoint[]> {
  const points: ClaimsPoint[] = []
  const client = new pg.Client({ connectionString: DATABASE_URL })
  await client.connect()
  try {
    for (const rows of QUICK ? [0, 10_000] : [0, 100_000, 1_000_000]) {
      const table = `acemq_curve_claims_${process.pid}_${rows}`
      await client.query(createTableSql({ table, dialect: 'postgres' }))
      try {
        // Every other row expired a year ago: one purge then has a full batch to delete.
        await client.query(
          `INSERT INTO ${table} (id, owner, claimed_at, confirmed, confirmed_at)
           SELECT 'seed-' || n, 'seed', t, true, t
           FROM generate_series(1, $1::int) AS n,
                LATERAL (SELECT (extract(epoch FROM now()) * 1000)::bigint
                                - CASE WHEN n % 2 = 0 THEN 31536000000 ELSE 0 END AS t) AS c`,
          [rows],
        )
        await client.query(`ANALYZE ${table}`)
        const result = await runInChild<ClaimResultPoint>({
          worker: 'curve:claims',
          params: { table, claims: QUICK ? 300 : 2_000 },
        })
        log(
          `  ${rows} rows: claim + confirm p50 ${fmt(result.p50Ms)} ms, p99 ${fmt(result.p99Ms)} ms, one purge ${fmt(result.purgeMs)} ms`,
        )
        points.push({ rows, ...result })
      } finally {
        await client.query(`DROP TABLE IF EXISTS ${table}`)
      }
    }
  } finally {
    await client.end()
  }
  return points
}

function selected(): readonly CurveId[] {
  const only = process.env['BENCH_CURVES']
  if (only === undefined || only === '') return CURVES
  const ids = only.split(',').map((s) => s.trim())
  for (const id of ids) {
    if (!(CURVES as readonly string[]).includes(id)) {
      throw new Error(`BENCH_CURVES: unknown curve '${id}' (one of ${CURVES.join(', ')})`)
    }
  }
  return ids as CurveId[]
}

function previous(): Partial<CurvesResult> {
  try {
    return JSON.parse(fs.readFileSync(RESULTS, 'utf8')) as CurvesResult
  } catch {
    return {}
  }
}

function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

async function main(): Promise<void> {
  const ids = selected()
  const loadStart = os.loadavg()[0] ?? 0
  const admin = await Admin.open()
  const measured: { -readonly [K in CurveId]?: CurvesResult[K] } = {}
  try {
    for (const id of ids) {
      log(`${id} …`)
      const began = Date.now()
      switch (id) {
        case 'prefetch':
          measured.prefetch = await prefetchCurve(admin)
          break
        case 'concurrency':
          measured.concurrency = await concurrencyCurve(admin)
          break
        case 'payload':
          measured.payload = await payloadCurve(admin)
          break
        case 'consumers':
          measured.consumers = await consumersCurve(admin)
          break
        case 'claims':
          measured.claims = await claimsCurve()
          break
      }
      log(`${id} took ${Math.round((Date.now() - began) / 1000)} s`)
    }
  } finally {
    await admin.close()
  }
  const result: CurvesResult = {
    ...previous(),
    ...measured,
    generatedAt: new Date().toISOString(),
    commit: commit(),
    load: [loadStart, os.loadavg()[0] ?? 0],
  }
  fs.writeFileSync(RESULTS, `${JSON.stringify(result, null, 2)}\n`)
  log(`wrote ${RESULTS}`)
  if (QUICK) return
  writeCharts(result)
  writeSection(result)
}

// ---------------------------------------------------------------------------------------------
// Charts and the BENCHMARKS.md section

function both(
  points: readonly ConsumePoint[],
  read: (p: ConsumePoint, v: Variant) => number,
): Series[] {
  return [
    { name: '@acemq', points: points.map((p) => [p.x, read(p, 'acemq')] as const) },
    {
      name: 'amqplib (raw)',
      points: points.map((p) => [p.x, read(p, 'amqplib')] as const),
      dashed: true,
    },
  ]
}

function consumeChart(
  title: string,
  xLabel: string,
  points: readonly ConsumePoint[],
  stamp: string,
): string {
  return renderChart({
    title,
    stamp,
    xLabel,
    logX: true,
    panels: [
      { yLabel: 'messages / s', series: both(points, (p, v) => p.msgsPerSec[v]) },
      { yLabel: 'CPU µs / message', series: both(points, (p, v) => p.cpuUsPerMessage[v]) },
    ],
  })
}

function charts(result: CurvesResult): Record<string, string> {
  const out: Record<string, string> = {}
  // The run that last wrote curves.json (a BENCH_CURVES run keeps the other curves' points).
  const stamp = `curves.json of ${result.generatedAt.slice(0, 16)}Z, commit ${result.commit}, 1-min load average ${fmt(result.load[0])} → ${fmt(result.load[1])}`
  if (result.prefetch) {
    out['prefetch.svg'] = consumeChart(
      'Consume vs prefetch (concurrency 1, handler returns at once)',
      'prefetch',
      result.prefetch,
      stamp,
    )
  }
  if (result.concurrency) {
    out['concurrency.svg'] = consumeChart(
      'Consume vs concurrency (1 ms handler, prefetch max(100, 2 × concurrency))',
      'concurrency',
      result.concurrency,
      stamp,
    )
  }
  if (result.payload) {
    out['payload.svg'] = consumeChart(
      'Consume vs payload size (prefetch 100, concurrency 1)',
      'body bytes',
      result.payload,
      stamp,
    )
  }
  if (result.consumers) {
    const series = (read: (r: ConsumersResult) => number): Series[] => [
      { name: '@acemq', points: result.consumers!.map((p) => [p.x, read(p.result.acemq)]) },
      {
        name: 'amqplib (raw)',
        points: result.consumers!.map((p) => [p.x, read(p.result.amqplib)]),
        dashed: true,
      },
    ]
    out['consumers.svg'] = renderChart({
      stamp,
      title: 'Consumers on one connection (one queue and channel each, 10 messages each)',
      xLabel: 'consumers',
      logX: true,
      panels: [
        { yLabel: 'RSS KiB / consumer', series: series((r) => r.rssPerConsumer / 1024) },
        { yLabel: 'CPU ms / consumer', series: series((r) => r.cpuMsPerConsumer) },
      ],
    })
  }
  if (result.claims) {
    const claims = result.claims
    out['claims.svg'] = renderChart({
      stamp,
      title: 'Kysely + Postgres: claim + confirm latency vs table size; one purge',
      xLabel: 'rows in the table (0 drawn at 1)',
      logX: true,
      panels: [
        {
          yLabel: 'ms',
          series: [
            { name: 'p50', points: claims.map((c) => [Math.max(1, c.rows), c.p50Ms]) },
            { name: 'p99', points: claims.map((c) => [Math.max(1, c.rows), c.p99Ms]) },
          ],
        },
        {
          yLabel: 'ms per purge (≤ 1,000 rows)',
          series: [{ name: 'purge', points: claims.map((c) => [Math.max(1, c.rows), c.purgeMs]) }],
        },
      ],
    })
  }
  return out
}

function writeCharts(result: CurvesResult): void {
  fs.mkdirSync(CHARTS, { recursive: true })
  for (const [file, svg] of Object.entries(charts(result))) {
    fs.writeFileSync(`${CHARTS}${file}`, svg)
    log(`wrote benchmarks/${file}`)
  }
}

function consumeTable(points: readonly ConsumePoint[], x: string): string[] {
  return [
    `| ${x} | @acemq msgs/s | amqplib msgs/s | ratio | @acemq µs/msg | amqplib µs/msg | ratio |`,
    '|--:|--:|--:|--:|--:|--:|--:|',
    ...points.map(
      (p) =>
        `| ${p.x.toLocaleString('en')} | ${fmt(p.msgsPerSec.acemq)} | ${fmt(p.msgsPerSec.amqplib)} | ${fmt(p.msgsPerSec.acemq / p.msgsPerSec.amqplib)} | ${fmt(p.cpuUsPerMessage.acemq)} | ${fmt(p.cpuUsPerMessage.amqplib)} | ${fmt(p.cpuUsPerMessage.acemq / p.cpuUsPerMessage.amqplib)} |`,
    ),
  ]
}

function section(result: CurvesResult): string {
  const lines = [
    '<!-- bench:curves:start -->',
    '<!-- Generated by `pnpm bench:curves` (bench/src/curves/curves.ts): edits between these markers are overwritten. -->',
    '',
    `_Measured ${result.generatedAt} on commit \`${result.commit}\`, 1-minute load average ${fmt(result.load[0])} at the start and ${fmt(result.load[1])} at the end; ${ROUNDS} round(s) per point, medians._`,
    '',
  ]
  const consume: [keyof CurvesResult, string, string][] = [
    ['prefetch', 'Against prefetch', 'prefetch'],
    ['concurrency', 'Against concurrency', 'concurrency'],
    ['payload', 'Against payload size', 'bytes'],
  ]
  for (const [key, title, x] of consume) {
    const points = result[key] as readonly ConsumePoint[] | undefined
    if (points === undefined) continue
    lines.push(`#### ${title}`, '', `![${title}](benchmarks/${key}.svg)`, '')
    lines.push(...consumeTable(points, x), '')
  }
  if (result.consumers) {
    lines.push(
      '#### Consumers on one connection',
      '',
      '![Consumers on one connection](benchmarks/consumers.svg)',
      '',
      '| consumers | @acemq RSS KiB each | amqplib RSS KiB each | @acemq heap KiB each | amqplib heap KiB each | @acemq CPU ms each | amqplib CPU ms each |',
      '|--:|--:|--:|--:|--:|--:|--:|',
      ...result.consumers.map(
        ({ x, result: r }) =>
          `| ${x.toLocaleString('en')} | ${fmt(r.acemq.rssPerConsumer / 1024)} | ${fmt(r.amqplib.rssPerConsumer / 1024)} | ${fmt(r.acemq.heapPerConsumer / 1024)} | ${fmt(r.amqplib.heapPerConsumer / 1024)} | ${fmt(r.acemq.cpuMsPerConsumer)} | ${fmt(r.amqplib.cpuMsPerConsumer)} |`,
      ),
      '',
    )
  }
  if (result.claims) {
    lines.push(
      '#### Idempotent claim latency against table size (Kysely + Postgres)',
      '',
      '![Claim latency](benchmarks/claims.svg)',
      '',
      '| rows | claim + confirm p50 ms | p99 ms | one purge ms |',
      '|--:|--:|--:|--:|',
      ...result.claims.map(
        (c) =>
          `| ${c.rows.toLocaleString('en')} | ${fmt(c.p50Ms)} | ${fmt(c.p99Ms)} | ${fmt(c.purgeMs)} |`,
      ),
      '',
    )
  }
  lines.push('<!-- bench:curves:end -->')
  return lines.join('\n')
}

function writeSection(result: CurvesResult): void {
  const text = fs.readFileSync(BENCHMARKS_MD, 'utf8')
  const start = text.indexOf('<!-- bench:curves:start -->')
  const end = text.indexOf('<!-- bench:curves:end -->')
  const body = section(result)
  const next =
    start >= 0 && end > start
      ? `${text.slice(0, start)}${body}${text.slice(end + '<!-- bench:curves:end -->'.length)}`
      : `${text.trimEnd()}\n\n## How cost grows\n\n${body}\n`
  fs.writeFileSync(BENCHMARKS_MD, next)
  log('updated BENCHMARKS.md (between the bench:curves markers)')
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
