import type { ProfileSummary } from './profile-summary.js'
import { median } from './stats.js'

/** One line of a table: a contestant's value in every round, and the median. */
export interface Row {
  readonly label: string
  readonly unit: string
  readonly values: readonly number[]
  readonly median: number
  /** Computed from other rows of the same round rather than measured on its own. */
  readonly derived?: boolean
}

/** A target: the median over rounds of a per-round ratio, against a bound. */
export interface Check {
  readonly description: string
  readonly formula: string
  readonly ratios: readonly number[]
  readonly ratio: number
  readonly op: '>=' | '<='
  readonly target: number
  readonly met: boolean
}

/** One measured setup with its table and targets. */
export interface Section {
  readonly title: string
  readonly setup: readonly string[]
  readonly rows: readonly Row[]
  readonly checks: readonly Check[]
  readonly notes: readonly string[]
  /**
   * Sentences written from this section's figures (src/internal/findings.ts) for the
   * conclusions: where the time goes, where growth stops.
   */
  readonly findings?: readonly string[]
  /** A free-form table, for what is not one value per round (memory samples). */
  readonly table?: {
    readonly header: readonly string[]
    readonly rows: readonly (readonly string[])[]
  }
}

export interface ProfileResult {
  readonly label: string
  /** Messages handled while the profile ran, to put its times per message. */
  readonly messages: number
  readonly summary: ProfileSummary
}

export interface ComparisonResult {
  readonly id: string
  readonly title: string
  readonly sections: readonly Section[]
  readonly profiles: readonly ProfileResult[]
  readonly seconds: number
}

export function row(label: string, unit: string, values: readonly number[], derived = false): Row {
  return { label, unit, values, median: median(values), ...(derived && { derived }) }
}

export function check(
  description: string,
  formula: string,
  ratios: readonly number[],
  op: '>=' | '<=',
  target: number,
): Check {
  const ratio = median(ratios)
  return {
    description,
    formula,
    ratios,
    ratio,
    op,
    target,
    met: op === '>=' ? ratio >= target : ratio <= target,
  }
}

/** Messages per second in each round. */
export function rates(runs: readonly { readonly ms: number }[], count: number): number[] {
  return runs.map((r) => (count * 1000) / r.ms)
}

/** Wall time per message in each round, in µs. */
export function wallPerMessage(runs: readonly { readonly ms: number }[], count: number): number[] {
  return runs.map((r) => (r.ms * 1000) / count)
}

/** The contestant process's CPU time per message in each round, in µs. */
export function cpuPerMessage(
  runs: readonly { readonly cpuMs: number }[],
  count: number,
): number[] {
  return runs.map((r) => (r.cpuMs * 1000) / count)
}
