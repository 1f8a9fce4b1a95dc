import { describe, expect, it } from 'vitest'
import { chosenNode, nodeVersionsMarkdown } from '../src/internal/node-choice.js'
import type { Report } from '../src/internal/report.js'
import { row } from '../src/internal/results.js'

const KNOWN = ['20', '22', '24']

describe('pnpm bench --node', () => {
  it('takes the major from --node, --node= or ACEMQ_BENCH_NODE, the flag first', () => {
    expect(chosenNode(['--node', '24'], {}, KNOWN)).toBe('24')
    expect(chosenNode(['--node=22'], {}, KNOWN)).toBe('22')
    expect(chosenNode([], { ACEMQ_BENCH_NODE: '22' }, KNOWN)).toBe('22')
    expect(chosenNode(['--node', '24'], { ACEMQ_BENCH_NODE: '22' }, KNOWN)).toBe('24')
    expect(chosenNode([], {}, KNOWN)).toBeUndefined()
    expect(chosenNode([], { ACEMQ_BENCH_NODE: '' }, KNOWN)).toBeUndefined()
  })

  it('refuses a major it cannot run on, naming where it came from and the value', () => {
    expect(() => chosenNode(['--node', '18'], {}, KNOWN)).toThrow(
      /--node must be a Node major the bench can run on \(20, 22, 24.*got "18"/,
    )
    expect(() => chosenNode([], { ACEMQ_BENCH_NODE: 'v24' }, KNOWN)).toThrow(
      /ACEMQ_BENCH_NODE must be .*got "v24"/,
    )
    expect(() => chosenNode(['--node'], {}, KNOWN)).toThrow(/--node needs a Node major/)
  })

  it('knows the machine’s major and every pinned one by default', () => {
    const running = process.versions.node.split('.')[0] as string
    expect(chosenNode(['--node', running], {})).toBe(running)
    expect(chosenNode(['--node', '24'], {})).toBe('24')
  })
})

function report(node: string, acemqCpu: number, publishCpu?: number): Report {
  const throughput = (id: string, rows: ReturnType<typeof row>[]) => ({
    id,
    title: id,
    ranAt: '2026-12-04T22:00:00.000Z',
    seconds: 1,
    profiles: [],
    sections: [{ title: 'Throughput', setup: [], rows, checks: [], notes: [] }],
  })
  return {
    generatedAt: '2026-12-04T22:00:00.000Z',
    quick: true,
    machine: {
      cpus: 2,
      cpuModel: 'x',
      memoryGb: 1,
      os: 'Linux',
      node,
      rabbitmq: '3',
      postgres: '15',
      commit: 'abc1234',
      uncommitted: [],
      loadStart: 1,
      loadEnd: 2,
    },
    sizes: { rounds: 2 },
    seconds: 1,
    ran: ['consume'],
    comparisons: [
      throughput('consume', [
        row('@acemq', 'msgs/s', [1000, 1000]),
        row('@acemq CPU', 'µs/msg', [acemqCpu, acemqCpu]),
        row('@acemq CPU ÷ amqplib CPU', '×', [0.9, 0.9], true),
      ]),
      ...(publishCpu === undefined
        ? []
        : [throughput('publish', [row('@acemq CPU', 'µs/msg', [publishCpu, publishCpu])])]),
    ],
  }
}

describe('the Node versions table of BENCHMARKS.md', () => {
  it('shows each CPU row of consume and publish once, one column per Node, lowest first', () => {
    const table = nodeVersionsMarkdown([
      report('v24.22.3', 18, 30),
      report('v20.20.2', 24),
      report('v22.23.5', 21, 33),
    ])
    const lines = table.split('\n')
    expect(lines).toContain(
      '| comparison | row | unit | Node 20.20.2 | Node 22.23.5 | Node 24.22.3 |',
    )
    expect(lines).toContain('| consume | @acemq CPU | µs/msg | **24** | **21** | **18** |')
    expect(lines).toContain(
      '| consume | @acemq CPU ÷ amqplib CPU | × | **0.9** | **0.9** | **0.9** |',
    )
    // Node 20's run measured no publish: its cell says so rather than being left out.
    expect(lines).toContain('| publish | @acemq CPU | µs/msg | — | **33** | **30** |')
    expect(lines.filter((l) => l.startsWith('| consume | @acemq |'))).toStrictEqual([])
    expect(table).toMatch(/- Node 20\.20\.2: 2026-12-04 22:00 UTC, commit abc1234, quick sizes/)
  })

  it('says how to make a run when there is none', () => {
    expect(nodeVersionsMarkdown([])).toMatch(/No `--node` run yet/)
  })
})
