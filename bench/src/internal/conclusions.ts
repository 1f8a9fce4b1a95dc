import type { Check, ComparisonResult, Row, Section } from './results.js'
import { fmt } from './stats.js'

// The ratio sentences of BENCHMARKS.md's conclusions, written from the results of the same run
// so that they can never contradict them (a hand-written range outlived the run it came from).

/** What the conclusions read of a report: its comparisons and when the run was. */
export interface ConclusionsInput {
  readonly generatedAt: string
  readonly quick: boolean
  /** The comparisons this run measured; the others were kept from an earlier run. */
  readonly ran: readonly string[]
  readonly comparisons: readonly (Pick<ComparisonResult, 'id' | 'title' | 'sections'> & {
    readonly ranAt: string
  })[]
}

/** Within this much of 1, a ratio is "on par": this shared machine moves a median by more. */
const PAR = 0.05

/** `min–max` of a ratio's rounds. */
function spread(values: readonly number[]): string {
  const lo = Math.min(...values)
  const hi = Math.max(...values)
  return lo === hi ? fmt(lo) : `${fmt(lo)}–${fmt(hi)}`
}

/**
 * How a ratio reads, in words: a rate (more is better: faster, slower), CPU per message, or a
 * cost (less is better: lower, higher).
 */
function verdict(ratio: number, kind: 'rate' | 'cost' | 'cpu'): string {
  const above = ratio > 1 + PAR
  const below = ratio < 1 - PAR
  if (kind === 'rate') return above ? 'faster' : below ? 'slower' : 'on par'
  if (kind === 'cpu') {
    return above
      ? 'more CPU per message'
      : below
        ? 'less CPU per message'
        : 'the same CPU per message'
  }
  return above ? 'higher' : below ? 'lower' : 'on par'
}

function checkSentence(check: Check): string {
  const kind = /CPU/.test(check.description) ? 'cpu' : check.op === '>=' ? 'rate' : 'cost'
  const target = `target ${check.op === '>=' ? '≥' : '≤'} ${check.target} ${check.met ? 'met' : 'missed'}`
  return `${check.description} **${fmt(check.ratio)} ×** (rounds ${spread(check.ratios)}): ${verdict(check.ratio, kind)}, ${target}`
}

/**
 * A derived ratio row no check covers (a CPU ratio, the retry hop, rascal's pace): CPU when it
 * says so, else a rate when the section measures per second, else a cost.
 */
function rowSentence(row: Row, section: Section): string {
  const perSecond = section.rows[0]?.unit.endsWith('/s') ?? false
  const kind = /CPU/.test(row.label) ? 'cpu' : perSecond ? 'rate' : 'cost'
  return `${row.label} **${fmt(row.median)} ×** (rounds ${spread(row.values)}): ${verdict(row.median, kind)}`
}

/** Whether a check already says what `row` says (the same CPU ratio, say). */
function covered(row: Row, checks: readonly Check[]): boolean {
  return checks.some((check) => Math.abs(check.ratio - row.median) < 1e-9)
}

/**
 * The numbered ratio sentences of a run, one per measured setup, and first how many of the
 * run's targets were met — each figure the median (and spread) of the results printed above
 * them in the same file.
 *
 * @example
 * ```ts
 * conclusionsMarkdown(report) // '1. **12 of 12 targets met** in the run of …'
 * ```
 */
export function conclusionsMarkdown(report: ConclusionsInput): string {
  const checks = report.comparisons.flatMap((c) => c.sections.flatMap((s) => s.checks))
  const met = checks.filter((check) => check.met).length
  const missed = checks.filter((check) => !check.met).map((check) => check.description)
  const lines = [
    `1. **${met} of ${checks.length} targets met** in the ${report.quick ? 'quick smoke ' : ''}run of ${report.generatedAt}${missed.length === 0 ? '' : `; missed: ${missed.join('; ')}`}. Each figure below is that run's median over its rounds, with the spread of the rounds; "on par" is within ${PAR * 100} % of 1.`,
  ]
  let n = 2
  for (const comparison of report.comparisons) {
    for (const section of comparison.sections) {
      const sentences = [
        ...section.checks.map(checkSentence),
        ...section.rows
          .filter(
            (row) =>
              row.derived === true &&
              row.unit === '×' &&
              /^(@acemq|rascal)\b/.test(row.label) &&
              !covered(row, section.checks),
          )
          .map((row) => rowSentence(row, section)),
        ...(section.findings ?? []),
      ]
      if (sentences.length === 0) continue
      // The comparison's own number ("1. Consume ...") would read as a second list number.
      const name = comparison.title.replace(/^\d+\.\s*/, '')
      const title = comparison.sections.length > 1 ? `${name} — ${section.title}` : name
      const when = report.ran.includes(comparison.id) ? '' : ` (kept from ${comparison.ranAt})`
      lines.push(`${n++}. **${title}**${when}: ${sentences.join('; ')}.`)
    }
  }
  return lines.join('\n')
}
