import { describe, expect, it } from 'vitest'
import { conclusionsMarkdown } from '../src/internal/conclusions.js'
import {
  ceilingFindings,
  latencyFindings,
  scaleoutFindings,
  type CeilingGap,
  type LatencySide,
} from '../src/internal/findings.js'

function gap(overrides: Partial<CeilingGap> = {}): CeilingGap {
  return {
    ratio: 0.54,
    protocolRatio: 0.7,
    wallUs: [106, 58.6],
    clientUs: [18.2, 5.65],
    brokerUs: [38.6, 26.8],
    ...overrides,
  }
}

function side(overrides: Partial<LatencySide> = {}): LatencySide {
  return {
    p50: 2,
    p99: 20,
    received: 1000,
    offered: 1000,
    cpuUs: 60,
    processCores: 0.3,
    brokerCores: 0.4,
    machineCores: 1,
    ...overrides,
  }
}

describe('where the time goes, from the figures', () => {
  it('splits a ceiling gap into the broker, the client and waiting when the cores are not full', () => {
    const [publish, consume] = ceilingFindings({
      type: 'classic',
      cpus: 2,
      publish: gap({ ratio: 0.63, protocolRatio: 0.71 }),
      consume: gap(),
    })
    expect(consume).toBe(
      "classic queue, consume: @acemq at **0.54 ×** the no-ack ceiling, raw amqplib acking at 0.7 × — per message 106 µs of wall time against 58.6 µs; @acemq's process 18.2 µs of CPU against the ceiling client's 5.65 µs (+12.5), the broker's 38.6 µs against 26.8 µs (+11.8); only 0.536 of the 2 cores are busy (at the ceiling 0.554), so most of the gap is waiting on acks (100 unacked at most: the prefetch), not CPU; raw amqplib with the same guarantees does better (0.7 ×): the library's share is the difference",
    )
    expect(publish).toContain('raw amqplib with confirms at 0.71 ×')
    expect(publish).toContain("does better (0.71 ×): the library's share is the difference")
    expect(publish).toContain('waiting on confirms (1,000 unconfirmed at most)')
  })

  it("names the client's one thread when its process is at a core, and full cores before waiting", () => {
    const [, thread] = ceilingFindings({
      type: 'quorum',
      cpus: 2,
      publish: gap(),
      consume: gap({ wallUs: [20, 10], clientUs: [19, 5], brokerUs: [10, 8] }),
    })
    expect(thread).toContain("@acemq's process is at 0.95 of a core: its one thread is the bound")
    const [, full] = ceilingFindings({
      type: 'quorum',
      cpus: 2,
      publish: gap(),
      consume: gap({ wallUs: [40, 10], clientUs: [30, 5], brokerUs: [45, 8] }),
    })
    expect(full).toContain(
      "the 2 cores are full (1.88 busy), so the gap is CPU, mostly the broker's",
    )
  })

  it('says when raw amqplib with the same guarantees does no better: the gap is the protocol', () => {
    const [, consume] = ceilingFindings({
      type: 'quorum',
      cpus: 2,
      publish: gap(),
      consume: gap({ ratio: 0.269, protocolRatio: 0.192 }),
    })
    expect(consume).toMatch(
      /; raw amqplib with the same guarantees does no better \(0\.192 ×\): this gap is the protocol's, not the library's$/,
    )
  })

  it("says the broker's CPU was not read rather than inventing it", () => {
    const [publish] = ceilingFindings({
      type: 'classic',
      cpus: 2,
      publish: gap({ brokerUs: [Number.NaN, Number.NaN] }),
      consume: gap(),
    })
    expect(publish).toMatch(/; the broker's CPU was not read$/)
  })

  it('lists the rates where @acemq p99 is within raw and above it, and says what was full when a side fell behind', () => {
    const [sentence] = latencyFindings(
      [
        { kind: 'async handler', rate: 1000, raw: side({ p99: 30 }), acemq: side({ p99: 20 }) },
        {
          kind: 'async handler',
          rate: 10_000,
          raw: side({ p99: 156 }),
          acemq: side({ p50: 336, p99: 942, processCores: 0.95, received: 900 }),
        },
      ],
      2,
    )
    expect(sentence).toBe(
      "async handler: @acemq's p99 at or below raw amqplib's at 1k/s and above it at 10k/s (942 ms against 156 ms, 6.04 ×); fell behind: @acemq at 10k/s (p50 336 ms, 90 % received in time), its process at 0.95 of a core, the broker at 0.4: its one thread is full",
    )
  })

  it('says where an above-raw point waited, stage by stage, when the run split the wait', () => {
    const stages = (transitP99: number, loopDelayP99: number, gcMs: number) => ({
      transitP99,
      loopDelayP99,
      gcMs,
    })
    const [sentence] = latencyFindings(
      [
        {
          kind: 'handler awaiting 1 ms of I/O',
          rate: 5000,
          raw: side({ p99: 8, cpuUs: 75, stages: stages(4.5, 3.1, 73) }),
          acemq: side({ p99: 10, cpuUs: 82.7, stages: stages(6.25, 3.4, 139) }),
        },
      ],
      2,
    )
    expect(sentence).toBe(
      "handler awaiting 1 ms of I/O: @acemq's p99 above it at 5k/s (10 ms against 8 ms, 1.25 × — published → handler started p99 6.25 against 4.5 ms, the event loop's delay p99 3.4 against 3.1 ms, garbage collection 139 against 73 ms, CPU 82.7 against 75 µs per message)",
    )
  })

  it('blames neither side when both fall behind with cores to spare', () => {
    const [sentence] = latencyFindings(
      [
        {
          kind: 'async handler',
          rate: 8000,
          raw: side({ p50: 4800, p99: 5100 }),
          acemq: side({ p50: 2800, p99: 3300 }),
        },
      ],
      2,
    )
    expect(sentence).toContain("at or below raw amqplib's at 8k/s")
    expect(sentence).toContain(
      "raw amqplib at 8k/s (p50 4,800 ms, 100 % received in time), its process at 0.3 of a core, the broker at 0.4: neither is full — the wait is elsewhere (the broker's queue)",
    )
    const [loaded] = latencyFindings(
      [
        {
          kind: 'async handler',
          rate: 8000,
          raw: side({ p50: 4800, p99: 5100, machineCores: 1.9 }),
          acemq: side({ p99: 20 }),
        },
      ],
      2,
    )
    expect(loaded).toContain('the whole machine at 1.9: the 2 cores are full with other work too')
  })

  it('finds where scale-out stops and what is full there', () => {
    const point = (
      consumers: number,
      rate: number,
      consumerCores: number,
      brokerCores: number,
    ) => ({
      consumers,
      rate,
      consumerCores,
      brokerCores,
      machineCores: consumerCores + brokerCores,
    })
    expect(
      scaleoutFindings(
        [point(1, 20_000, 0.6, 0.7), point(2, 26_000, 1, 0.9), point(4, 27_000, 1.1, 0.8)],
        2,
        'One queue',
      ),
    ).toBe(
      "One queue (processes): 1 → 20,000 msgs/s, 2 → 26,000 msgs/s, 4 → 27,000 msgs/s: growth stops at 4 processes (×1.04 over 2), with consumers 1.1 cores, the broker 0.8, of the machine's 2: bound by the machine's 2 cores (1.9 busy)",
    )
    expect(
      scaleoutFindings([point(1, 10_000, 0.3, 0.3), point(2, 10_500, 0.35, 0.35)], 2, 'One queue'),
    ).toContain('bound by the broker (neither the cores nor the consumer processes are full')
    expect(
      scaleoutFindings(
        [point(1, 10_000, 0.3, 0.3), { ...point(2, 10_500, 0.35, 0.35), machineCores: 1.95 }],
        2,
        'One queue',
      ),
    ).toContain("bound by the machine's 2 cores, full with other work too (1.95 busy in all)")
    expect(
      scaleoutFindings([point(1, 10_000, 0.3, 0.3), point(2, 19_000, 0.6, 0.5)], 2, 'One queue'),
    ).toContain('still growing at 2')
  })

  it('puts a section’s findings into the conclusions after its ratios', () => {
    const text = conclusionsMarkdown({
      generatedAt: '2026-12-05T22:00:00.000Z',
      quick: false,
      ran: ['scaleout'],
      comparisons: [
        {
          id: 'scaleout',
          title: '10. Scale-out: consumer processes on one queue',
          ranAt: '2026-12-05T22:00:00.000Z',
          sections: [
            {
              title: 'Aggregate throughput and CPU',
              setup: [],
              rows: [],
              checks: [],
              notes: [],
              findings: ['One queue (processes): still growing at 4'],
            },
          ],
        },
      ],
    })
    expect(text).toContain(
      '2. **Scale-out: consumer processes on one queue**: One queue (processes): still growing at 4.',
    )
  })
})
