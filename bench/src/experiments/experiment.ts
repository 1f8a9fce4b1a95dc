import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { withWarmupAndMain } from '../comparisons/comparison.js'
import { Admin } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { QUICK } from '../internal/config.js'
import type { Measured } from '../internal/profiler.js'
import { interleave } from '../internal/rounds.js'

/** What a consume experiment's worker is given: its variant and two pre-filled queues. */
export interface ConsumeParams<V extends string> {
  readonly variant: V
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
}

/**
 * Runs `worker` once per variant per round, interleaved, each run in a fresh process draining
 * its own freshly filled queue after a warm-up queue; returns CPU µs per message by variant.
 */
export async function interleaveConsumers<V extends string>(options: {
  readonly name: string
  readonly worker: string
  readonly variants: readonly V[]
  readonly rounds: number
  readonly count: number
  readonly warmup: number
}): Promise<Record<V, number[]>> {
  const { name, worker, variants, rounds, count, warmup } = options
  const admin = await Admin.open()
  try {
    const runs = await interleave({
      name,
      variants,
      rounds,
      unit: 'ms',
      log: (line) => console.log(line),
      recover: () => admin.waitForBroker(),
      measure: (variant) =>
        withWarmupAndMain(admin, `${name}-${variant}`, warmup, count, (warmupQueue, queue) =>
          runInChild<Measured>({
            worker,
            params: { variant, warmupQueue, warmup, queue, count } satisfies ConsumeParams<V>,
          }),
        ),
    })
    const cpu = {} as Record<V, number[]>
    for (const v of variants) cpu[v] = runs[v].map((r) => (r.cpuMs * 1000) / count)
    return cpu
  } finally {
    await admin.close()
  }
}

/** Writes `results/{name}.json` (not on a quick run). */
export function writeResult(name: string, body: object): void {
  if (QUICK) return
  const file = fileURLToPath(new URL(`../../results/${name}.json`, import.meta.url))
  fs.writeFileSync(
    file,
    `${JSON.stringify({ generatedAt: new Date().toISOString(), ...body }, null, 2)}\n`,
  )
  console.log(`wrote ${file}`)
}

/** Runs `main` when `moduleUrl` is the script node was started with. */
export function runWhenMain(moduleUrl: string, main: () => Promise<void>): void {
  if (process.argv[1] !== fileURLToPath(moduleUrl)) return
  main().catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
