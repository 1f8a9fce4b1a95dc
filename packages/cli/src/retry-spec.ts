import { RetryPolicy, type Duration } from '@acemq/core'
import { toMillis } from '@acemq/core/spi'
import { UsageError } from './exit-codes.js'

/**
 * Reads a retry policy written as its factory call: `none()`, `fixed(3, 5s)`,
 * `exponential(5, 1s, 1m)` (durations as `250ms`, `30s`, `5m`, `6h`, `1d`, or milliseconds).
 *
 * @example
 * ```ts
 * parseRetry('exponential(5,1s,1m)').schedule() // [1000, 2000, 4000, 8000]
 * ```
 */
export function parseRetry(spec: string): RetryPolicy {
  const match = /^\s*(none|fixed|exponential)\s*\(([^)]*)\)\s*$/.exec(spec)
  if (match === null) {
    throw new UsageError(
      `--retry must look like none(), fixed(3,5s) or exponential(5,1s,1m); got ${JSON.stringify(spec)}`,
    )
  }
  const kind = match[1]
  const args = (match[2] ?? '')
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '')
  const count = (value: string | undefined): number => {
    const n = Number(value)
    if (!Number.isSafeInteger(n) || n < 1) {
      throw new UsageError(
        `--retry: the attempts must be a whole number from 1; got ${String(value)}`,
      )
    }
    return n
  }
  const duration = (value: string | undefined, what: string): number => {
    if (value === undefined) throw new UsageError(`--retry: ${kind}() needs ${what}`)
    const asNumber = Number(value)
    try {
      return toMillis(
        (Number.isFinite(asNumber) && value !== '' ? asNumber : value) as Duration,
        `--retry ${what}`,
      )
    } catch (error) {
      throw new UsageError((error as Error).message)
    }
  }
  switch (kind) {
    case 'none':
      if (args.length > 0) throw new UsageError('--retry: none() takes no arguments')
      return RetryPolicy.none()
    case 'fixed':
      if (args.length !== 2) throw new UsageError('--retry: fixed(attempts, delay)')
      return RetryPolicy.fixed(count(args[0]), duration(args[1], 'a delay'))
    default:
      if (args.length < 2 || args.length > 3)
        throw new UsageError('--retry: exponential(attempts, first delay[, cap])')
      return args[2] === undefined
        ? RetryPolicy.exponential(count(args[0]), duration(args[1], 'a first delay'))
        : RetryPolicy.exponential(
            count(args[0]),
            duration(args[1], 'a first delay'),
            duration(args[2], 'a cap'),
          )
  }
}
