import { describe, expect, it } from 'vitest'
import { conclusionsMarkdown, type ConclusionsInput } from '../src/internal/conclusions.js'
import { check, row } from '../src/internal/results.js'

/** A consume comparison whose rounds say what the run measured. */
function consume(throughput: number[], cpu: number[]): ConclusionsInput['comparisons'][number] {
  return {
    id: 'consume',
    title: '1. Consume, acked, JSON payload, prefetch 100',
    ranAt: '2026-12-04T11:26:15.198Z',
    sections: [
      {
        title: 'Throughput',
        setup: [],
        notes: [],
        rows: [
          row('@acemq', 'msgs/s', [1, 1, 1]),
          row('@acemq CPU ÷ amqplib CPU', '×', cpu, true),
          row('rascal ÷ amqplib', '×', [0.25, 0.26, 0.3], true),
        ],
        checks: [
          check('@acemq consumer throughput vs raw amqplib', 'ratio', throughput, '>=', 1),
          check('@acemq consumer CPU per message vs raw amqplib', 'ratio', cpu, '<=', 1.2),
        ],
      },
    ],
  }
}

function report(comparisons: ConclusionsInput['comparisons'], ran = ['consume']): ConclusionsInput {
  return { generatedAt: '2026-12-04T11:46:15.605Z', quick: false, ran, comparisons }
}

describe('the conclusions BENCHMARKS.md prints', () => {
  it('says what the run measured: consume 1.86 × raw at 0.911 × its CPU is faster with less CPU, not on par at more', () => {
    const text = conclusionsMarkdown(report([consume([1.41, 1.86, 2.17], [0.827, 0.911, 1.1])]))
    expect(text).toContain(
      '2. **Consume, acked, JSON payload, prefetch 100**: @acemq consumer throughput vs raw amqplib **1.86 ×** (rounds 1.41–2.17): faster, target ≥ 1 met; @acemq consumer CPU per message vs raw amqplib **0.911 ×** (rounds 0.827–1.1): less CPU per message, target ≤ 1.2 met; rascal ÷ amqplib **0.26 ×** (rounds 0.25–0.3): slower.',
    )
    // The CPU ratio row is the check's own figure: said once.
    expect(text).not.toContain('@acemq CPU ÷ amqplib CPU')
  })

  it('follows the figures: a run at 0.97 × with 1.3 × the CPU reads on par and more CPU, both targets missed', () => {
    const text = conclusionsMarkdown(report([consume([0.95, 0.97, 0.99], [1.25, 1.3, 1.35])]))
    expect(text).toContain(
      '1. **0 of 2 targets met** in the run of 2026-12-04T11:46:15.605Z; missed: @acemq consumer throughput vs raw amqplib; @acemq consumer CPU per message vs raw amqplib.',
    )
    expect(text).toContain(
      'vs raw amqplib **0.97 ×** (rounds 0.95–0.99): on par, target ≥ 1 missed; @acemq consumer CPU per message vs raw amqplib **1.3 ×** (rounds 1.25–1.35): more CPU per message, target ≤ 1.2 missed',
    )
  })

  it('says when a comparison was kept from an earlier run rather than measured in this one', () => {
    const text = conclusionsMarkdown(report([consume([1.1], [1])], []))
    expect(text).toContain(
      '2. **Consume, acked, JSON payload, prefetch 100** (kept from 2026-12-04T11:26:15.198Z):',
    )
  })

  it('reads a cost ratio the other way: a retry hop at 0.199 × a hand-written one is lower', () => {
    const text = conclusionsMarkdown(
      report(
        [
          {
            id: 'retry',
            title: '4. Retry hops, close latency, resident memory',
            ranAt: '2026-12-04T11:42:57.981Z',
            sections: [
              {
                title: 'Retry hop: one in-consumer retry republish',
                setup: [],
                notes: [],
                rows: [
                  row('@acemq: extra per hop', 'ms/msg', [0.4, 0.5]),
                  row('@acemq hop ÷ amqplib hop', '×', [0.134, 0.199, 0.27], true),
                ],
                checks: [],
              },
              { title: 'Close latency', setup: [], notes: [], rows: [], checks: [] },
            ],
          },
        ],
        ['retry'],
      ),
    )
    expect(text).toBe(
      [
        '1. **0 of 0 targets met** in the run of 2026-12-04T11:46:15.605Z. Each figure below is that run\'s median over its rounds, with the spread of the rounds; "on par" is within 5 % of 1.',
        '2. **Retry hops, close latency, resident memory — Retry hop: one in-consumer retry republish**: @acemq hop ÷ amqplib hop **0.199 ×** (rounds 0.134–0.27): lower.',
      ].join('\n'),
    )
  })
})
