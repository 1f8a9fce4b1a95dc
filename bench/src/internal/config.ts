/** Where the services are, and how big each run is. `BENCH_QUICK=1` shrinks everything. */

export const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672'
export const DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test'

/** A smoke test: tiny sizes, two rounds, nothing written to BENCHMARKS.md. */
export const QUICK = process.env['BENCH_QUICK'] === '1'

/** Every comparison, by id, in the order they run. */
export const COMPARISON_IDS = [
  'consume',
  'publish',
  'idempotent',
  'retry',
  'ordered',
  'outbox',
  'rpc',
  'ceiling',
  'latency',
  'scaleout',
  'cluster',
  'rss',
] as const
export type ComparisonId = (typeof COMPARISON_IDS)[number]

function envInt(name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer; got ${raw}`)
  return value
}

/** Which comparisons to run (`BENCH_ONLY=consume,publish`); all by default. */
export function selectedComparisons(): readonly ComparisonId[] {
  const raw = process.env['BENCH_ONLY']
  if (raw === undefined || raw.trim() === '') return COMPARISON_IDS
  const wanted = raw.split(',').map((s) => s.trim())
  for (const id of wanted) {
    if (!(COMPARISON_IDS as readonly string[]).includes(id)) {
      throw new Error(
        `BENCH_ONLY: unknown comparison '${id}'; pick from ${COMPARISON_IDS.join(', ')}`,
      )
    }
  }
  return COMPARISON_IDS.filter((id) => wanted.includes(id))
}

/**
 * Comparisons to profile even when their target is met (`BENCH_PROFILE=consume,publish`, or
 * `all`). A missed target is always profiled.
 */
export function forcedProfiles(): ReadonlySet<string> {
  const raw = process.env['BENCH_PROFILE'] ?? ''
  if (raw.trim() === 'all') return new Set(COMPARISON_IDS)
  return new Set(
    raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== ''),
  )
}

/** Sizes of every run. Chosen so that the full run stays within a few minutes on 2 cores. */
export interface Sizes {
  readonly rounds: number
  /** Messages each variant handles before its measured run, in the same process (JIT warm-up). */
  readonly warmup: number
  readonly consume: number
  readonly publish: number
  readonly publishWindow: number
  /** rascal publishes fewer: it keeps at most 5 outstanding, whatever the window. */
  readonly publishRascal: number
  readonly idempotentMemory: number
  readonly idempotentSqlite: number
  readonly idempotentPostgres: number
  readonly postgresConcurrency: number
  readonly retry: number
  readonly closeBacklog: number
  readonly profile: number
  /** Entries an ordered-queue run drains, and the keys they are spread over. */
  readonly ordered: number
  readonly orderedKeys: number
  readonly orderedWarmup: number
  /** Messages per ceiling run (publish and consume), on each queue type. */
  readonly ceiling: number
  /** Seconds at each offered rate (after a warm-up second not recorded), and the rates. */
  readonly latencySeconds: number
  readonly latencyRates: readonly number[]
  /** Messages a scale-out run drains in all (split however the consumers take them). */
  readonly scaleout: number
  /** Messages the RSS run consumes, and how often it samples. */
  readonly rssTotal: number
  readonly rssEvery: number
}

export function sizes(): Sizes {
  const rounds = envInt('BENCH_ROUNDS', QUICK ? 2 : 5)
  if (QUICK) {
    return {
      rounds,
      warmup: 300,
      consume: 1_000,
      publish: 1_000,
      publishWindow: 1_000,
      publishRascal: 500,
      idempotentMemory: 1_000,
      idempotentSqlite: 1_000,
      idempotentPostgres: 500,
      postgresConcurrency: 20,
      retry: 100,
      closeBacklog: 500,
      profile: 2_000,
      ordered: 1_000,
      orderedKeys: 1_000,
      orderedWarmup: 200,
      ceiling: 3_000,
      latencySeconds: 1,
      latencyRates: [1_000, 5_000],
      scaleout: 6_000,
      rssTotal: 20_000,
      rssEvery: 2_000,
    }
  }
  return {
    rounds,
    warmup: 2_000,
    consume: 20_000,
    publish: 20_000,
    publishWindow: 1_000,
    publishRascal: 5_000,
    // 30,000: at ~50 µs a message, 10,000 made the @acemq run half a second long, and one
    // scheduling hiccup of the VM moved a round's ratio by 0.4 (BENCHMARKS.md, second sitting).
    idempotentMemory: 30_000,
    idempotentSqlite: 10_000,
    idempotentPostgres: 6_000,
    postgresConcurrency: 20,
    retry: 1_000,
    closeBacklog: 5_000,
    profile: 30_000,
    // Prefetch 1 per partition: one partition moves about one entry per broker round trip.
    ordered: 6_000,
    orderedKeys: 1_000,
    orderedWarmup: 1_000,
    // At the ceiling a broker moves 30-100k/s: 50,000 is a run of about a second or more, enough
    // for /proc's 10 ms CPU ticks.
    ceiling: 50_000,
    latencySeconds: 4,
    latencyRates: [1_000, 5_000, 10_000],
    scaleout: 60_000,
    rssTotal: 1_000_000,
    rssEvery: 50_000,
  }
}
