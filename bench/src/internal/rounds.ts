import { withBrokerLock } from './broker-lock.js'
import { fmt } from './stats.js'

/** A round that fails this many times stops the benchmark. */
const MAX_ATTEMPTS = 3

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  return message.split('\n')[0] ?? message
}

/**
 * Runs every variant once per round, interleaved (A, B, C, A, B, C, ...), the starting variant
 * rotating from round to round so that no variant always runs right after the same other one.
 * Each round holds the broker-fault lock. Returns each variant's values, in round order.
 */
export async function interleave<V extends string, M extends { readonly ms: number }>(options: {
  readonly name: string
  readonly variants: readonly V[]
  readonly rounds: number
  readonly unit: string
  readonly log: (line: string) => void
  readonly measure: (variant: V, round: number) => Promise<M>
  /** Called after a measurement failed (the broker restarted under it): the round runs again. */
  readonly recover: (error: unknown) => Promise<void>
}): Promise<Record<V, M[]>> {
  const { variants, rounds, log } = options
  const values = Object.fromEntries(variants.map((v) => [v, [] as M[]])) as Record<V, M[]>
  for (let round = 0; round < rounds; round++) {
    const order = variants.map((_, i) => variants[(i + round) % variants.length] as V)
    for (let attempt = 1; ; attempt++) {
      try {
        const measured = await withBrokerLock(async () => {
          const results: [V, M][] = []
          for (const variant of order)
            results.push([variant, await options.measure(variant, round)])
          return results
        }, log)
        for (const [variant, value] of measured) values[variant].push(value)
        const parts = measured.map(([variant, value]) => `${variant} ${fmt(value.ms)}`)
        log(`  ${options.name} round ${round + 1}/${rounds}: ${parts.join(', ')} ${options.unit}`)
        break
      } catch (error) {
        if (attempt >= MAX_ATTEMPTS) throw error
        log(`  ! ${options.name} round ${round + 1} failed (${describe(error)}); running it again`)
        await options.recover(error)
      }
    }
  }
  return values
}
