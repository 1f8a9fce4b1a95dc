/** The middle value (mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const upper = sorted[mid] as number
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] as number) + upper) / 2
}

/** `a[i] / b[i]` for each round. */
export function perRound(
  a: readonly number[],
  b: readonly number[],
  f: (x: number, y: number) => number,
): number[] {
  if (a.length !== b.length) throw new Error(`rounds differ: ${a.length} vs ${b.length}`)
  return a.map((x, i) => f(x, b[i] as number))
}

/** `a / b`, for {@link perRound}. */
export function div(a: number, b: number): number {
  return a / b
}

/** `a + b`, for {@link perRound}. */
export function sum(a: number, b: number): number {
  return a + b
}

/** Least-squares slope of `ys` over `xs`. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length
  if (n < 2) return 0
  const mx = xs.reduce((s, x) => s + x, 0) / n
  const my = ys.reduce((s, y) => s + y, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    const dx = (xs[i] as number) - mx
    num += dx * ((ys[i] as number) - my)
    den += dx * dx
  }
  return den === 0 ? 0 : num / den
}

/** Rounds for display: 3 significant digits, no exponent. */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return String(value)
  if (value === 0) return '0'
  const magnitude = Math.floor(Math.log10(Math.abs(value)))
  const decimals = Math.max(0, digits - 1 - magnitude)
  return value.toLocaleString('en-US', {
    maximumFractionDigits: decimals,
    minimumFractionDigits: 0,
  })
}
