import { ConfigurationError } from './errors.js'

/** A unit a duration string may use. */
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd'

/**
 * A duration: milliseconds as a `number`, or a number with a unit (`'250ms'`, `'30s'`,
 * `'5m'`, `'6h'`, `'1d'`). A string with an unknown unit does not compile.
 *
 * @example
 * ```ts
 * const wait: Duration = '30s'
 * ```
 */
export type Duration = number | `${number}${DurationUnit}`

const UNIT_MS: Readonly<Record<DurationUnit, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
}

const PATTERN = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/

/**
 * Turns a {@link Duration} into whole milliseconds. Throws a {@link ConfigurationError} naming
 * `name` and the value for a negative, non-finite or unparsable duration.
 *
 * @example
 * ```ts
 * toMillis('1.5s', 'delay') // 1500
 * ```
 */
export function toMillis(value: Duration, name = 'duration'): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) {
      throw new ConfigurationError(
        `${name} must be a finite, non-negative number of milliseconds or a string such as '30s'; got ${String(value)}`,
      )
    }
    return Math.round(value)
  }
  if (typeof value === 'string') {
    const match = PATTERN.exec(value.trim())
    if (match) {
      const ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit]
      if (Number.isFinite(ms)) return Math.round(ms)
    }
  }
  throw new ConfigurationError(
    `${name} must be milliseconds or a number with a unit (ms, s, m, h, d) such as '30s'; got ${JSON.stringify(value)}`,
  )
}

/**
 * Renders whole milliseconds in the largest unit that divides them: `2h`, `5m`, `90s`,
 * `500ms`. This is the rendering rung queue names use.
 *
 * @example
 * ```ts
 * formatDuration(90_000) // '90s'
 * ```
 */
export function formatDuration(ms: number): string {
  if (ms > 0 && ms % UNIT_MS.h === 0) return `${ms / UNIT_MS.h}h`
  if (ms > 0 && ms % UNIT_MS.m === 0) return `${ms / UNIT_MS.m}m`
  if (ms > 0 && ms % UNIT_MS.s === 0) return `${ms / UNIT_MS.s}s`
  return `${ms}ms`
}

/**
 * `2d 3h`, `5m 12s`, `800ms`: the two largest units of a duration, for people (the cli and the
 * console show ages with it).
 *
 * @example
 * ```ts
 * humanDuration(3_720_000) // '1h 2m'
 * ```
 */
export function humanDuration(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))}ms`
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ]
  const parts: string[] = []
  let rest = ms
  for (const [name, size] of units) {
    const n = Math.floor(rest / size)
    if (n > 0 || parts.length > 0) parts.push(`${n}${name}`)
    rest -= n * size
    if (parts.length === 2) break
  }
  return parts.filter((p) => !p.startsWith('0')).join(' ') || '0s'
}
