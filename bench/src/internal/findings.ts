import { fmt } from './stats.js'

// The sentences BENCHMARKS.md's conclusions say about where the time goes (issue 32), written
// from the medians of the same run, so they follow the figures: the ceiling's gap split into the
// broker's CPU, the client's CPU and waiting; where latency breaks away; where scale-out stops.

/** One direction of a ceiling comparison: `[@acemq, ceiling]` medians per message. */
export interface CeilingGap {
  readonly ratio: number
  /** Raw amqplib with confirms (publish) or acks (consume) ÷ the ceiling: the protocol's share. */
  readonly protocolRatio: number
  readonly wallUs: readonly [number, number]
  readonly clientUs: readonly [number, number]
  /** NaN when the broker's CPU could not be read. */
  readonly brokerUs: readonly [number, number]
}

function us(value: number): string {
  return `${fmt(value)} µs`
}

function signed(value: number): string {
  return `${value >= 0 ? '+' : '−'}${fmt(Math.abs(value))}`
}

function gapSentence(
  what: string,
  ceiling: string,
  protocol: string,
  waitingOn: string,
  gap: CeilingGap,
  cpus: number,
): string {
  const [wall, wallCeiling] = gap.wallUs
  const [client, clientCeiling] = gap.clientUs
  const [broker, brokerCeiling] = gap.brokerUs
  const head = `${what}: @acemq at **${fmt(gap.ratio)} ×** the ${ceiling}, raw amqplib ${protocol} at ${fmt(gap.protocolRatio)} × — per message ${us(wall)} of wall time against ${us(wallCeiling)}; @acemq's process ${us(client)} of CPU against the ceiling client's ${us(clientCeiling)} (${signed(client - clientCeiling)})`
  if (!Number.isFinite(broker) || !Number.isFinite(brokerCeiling)) {
    return `${head}; the broker's CPU was not read`
  }
  const extraBroker = broker - brokerCeiling
  const extraClient = client - clientCeiling
  const clientBusy = client / wall
  const busy = (client + broker) / wall
  const busyCeiling = (clientCeiling + brokerCeiling) / wallCeiling
  const larger = extraBroker > extraClient ? "the broker's" : "@acemq's process's"
  const share =
    gap.ratio >= 0.95 * gap.protocolRatio
      ? `; raw amqplib with the same guarantees does no better (${fmt(gap.protocolRatio)} ×): this gap is the protocol's, not the library's`
      : `; raw amqplib with the same guarantees does better (${fmt(gap.protocolRatio)} ×): the library's share is the difference`
  const where =
    clientBusy >= 0.85
      ? `@acemq's process is at ${fmt(clientBusy)} of a core: its one thread is the bound`
      : busy >= 0.85 * cpus
        ? `the ${cpus} cores are full (${fmt(busy)} busy), so the gap is CPU, mostly ${larger}`
        : `only ${fmt(busy)} of the ${cpus} cores are busy (at the ceiling ${fmt(busyCeiling)}), so most of the gap is waiting on ${waitingOn}, not CPU`
  return `${head}, the broker's ${us(broker)} against ${us(brokerCeiling)} (${signed(extraBroker)}); ${where}${share}`
}

/** Where the time goes between `@acemq` and the broker's ceiling on one queue type. */
export function ceilingFindings(input: {
  readonly type: string
  readonly cpus: number
  readonly publish: CeilingGap
  readonly consume: CeilingGap
}): string[] {
  return [
    gapSentence(
      `${input.type} queue, publish`,
      'no-confirm ceiling',
      'with confirms',
      'confirms (1,000 unconfirmed at most)',
      input.publish,
      input.cpus,
    ),
    gapSentence(
      `${input.type} queue, consume`,
      'no-ack ceiling',
      'acking',
      'acks (100 unacked at most: the prefetch)',
      input.consume,
      input.cpus,
    ),
  ]
}

/** One side of one latency point: medians over rounds. */
export interface LatencySide {
  readonly p50: number
  readonly p99: number
  readonly received: number
  readonly offered: number
  /** CPU of the process (publisher and consumer) per message, µs. */
  readonly cpuUs: number
  /** Cores the process and the broker kept busy (CPU time ÷ wall time); NaN when unread. */
  readonly processCores: number
  readonly brokerCores: number
  /** Cores the whole machine kept busy, other people's work included; NaN when unread. */
  readonly machineCores: number
  /** Where the wait went (medians over rounds, ms), when the run split it. */
  readonly stages?: {
    /** Published → handler started: the publish path, the broker and the consume path. */
    readonly transitP99: number
    /** The process's event-loop delay, p99. */
    readonly loopDelayP99: number
    /** Garbage-collection pauses over the recorded stretch, in all. */
    readonly gcMs: number
  }
}

/** Where an above-raw point's wait went, side by side; empty when the stages were not split. */
function whereWaited(p: LatencyPoint): string {
  const a = p.acemq.stages
  const r = p.raw.stages
  if (a === undefined || r === undefined) return ''
  return ` — published → handler started p99 ${fmt(a.transitP99)} against ${fmt(r.transitP99)} ms, the event loop's delay p99 ${fmt(a.loopDelayP99)} against ${fmt(r.loopDelayP99)} ms, garbage collection ${fmt(a.gcMs)} against ${fmt(r.gcMs)} ms, CPU ${fmt(p.acemq.cpuUs)} against ${fmt(p.raw.cpuUs)} µs per message`
}

/** A median latency above this means the messages queue: the side has fallen behind. */
const QUEUEING_MS = 100

export interface LatencyPoint {
  /** The handler, in words ("async handler"). */
  readonly kind: string
  readonly rate: number
  readonly raw: LatencySide
  readonly acemq: LatencySide
}

/** What was full when a latency side fell behind: its own thread, the machine, or neither. */
function bound(side: LatencySide, cpus: number): string {
  const broker = Number.isFinite(side.brokerCores) ? side.brokerCores : 0
  const cores = `its process at ${fmt(side.processCores)} of a core, the broker at ${Number.isFinite(side.brokerCores) ? fmt(side.brokerCores) : '(unread)'}`
  if (side.processCores >= 0.9) return `${cores}: its one thread is full`
  if (side.processCores + broker >= 0.85 * cpus)
    return `${cores}: the machine's ${cpus} cores are full`
  if (side.machineCores >= 0.85 * cpus) {
    return `${cores}, the whole machine at ${fmt(side.machineCores)}: the ${cpus} cores are full with other work too`
  }
  return `${cores}: neither is full — the wait is elsewhere (the broker's queue)`
}

function rateList(rates: readonly number[]): string {
  return rates.map((r) => `${fmt(r / 1000)}k`).join(', ')
}

/**
 * Per handler: the rates at which `@acemq`'s p99 was at or below raw amqplib's and those at
 * which it was above; and where either side fell behind (p50 over 100 ms, or not every message
 * received in time), what was full: its process's one thread (a Node process that publishes and
 * consumes runs on one thread, so at a core it cannot keep up), the machine's cores, or neither.
 */
export function latencyFindings(points: readonly LatencyPoint[], cpus: number): string[] {
  const out: string[] = []
  for (const kind of [...new Set(points.map((p) => p.kind))]) {
    const mine = points.filter((p) => p.kind === kind)
    const within = mine.filter((p) => p.acemq.p99 <= p.raw.p99)
    const above = mine.filter((p) => p.acemq.p99 > p.raw.p99)
    const parts: string[] = []
    if (within.length > 0)
      parts.push(`at or below raw amqplib's at ${rateList(within.map((p) => p.rate))}/s`)
    if (above.length > 0) {
      parts.push(
        `above it at ${above
          .map(
            (p) =>
              `${fmt(p.rate / 1000)}k/s (${fmt(p.acemq.p99)} ms against ${fmt(p.raw.p99)} ms, ${fmt(p.acemq.p99 / p.raw.p99)} ×${whereWaited(p)})`,
          )
          .join(', ')}`,
      )
    }
    let sentence = `${kind}: @acemq's p99 ${parts.join(' and ')}`
    const behind: string[] = []
    for (const p of mine) {
      for (const [name, side] of [
        ['@acemq', p.acemq],
        ['raw amqplib', p.raw],
      ] as const) {
        if (side.received >= side.offered && side.p50 <= QUEUEING_MS) continue
        behind.push(
          `${name} at ${fmt(p.rate / 1000)}k/s (p50 ${fmt(side.p50)} ms, ${fmt((100 * side.received) / side.offered)} % received in time), ${bound(side, cpus)}`,
        )
      }
    }
    if (behind.length > 0) sentence += `; fell behind: ${behind.join('; ')}`
    out.push(sentence)
  }
  return out
}

/** One scale-out point: aggregate throughput and CPU in cores (CPU time ÷ wall time). */
export interface ScalePoint {
  readonly consumers: number
  readonly rate: number
  readonly consumerCores: number
  /** NaN when the broker's CPU could not be read. */
  readonly brokerCores: number
  /** The whole machine, other people's work included; NaN when unread. */
  readonly machineCores: number
}

/** Growth below this factor from one point to the next counts as stopped. */
const GROWTH = 1.15

/**
 * How aggregate throughput grows with consumer processes, and what is full where it stops
 * growing: the machine's cores (consumers + broker near all of them), the library (each
 * consumer process near a core of its own), or else the broker.
 */
export function scaleoutFindings(
  points: readonly ScalePoint[],
  cpus: number,
  label: string,
  unit = 'processes',
): string {
  const series = points.map((p) => `${p.consumers} → ${fmt(p.rate)} msgs/s`).join(', ')
  const stop = points.findIndex(
    (p, i) => i > 0 && p.rate < GROWTH * (points[i - 1] as ScalePoint).rate,
  )
  const describe = (p: ScalePoint): string => {
    const broker = Number.isFinite(p.brokerCores) ? `, the broker ${fmt(p.brokerCores)}` : ''
    return `consumers ${fmt(p.consumerCores)} cores${broker}, of the machine's ${cpus}`
  }
  if (stop < 0) {
    const last = points.at(-1) as ScalePoint
    return `${label} (${unit}): ${series}: still growing at ${last.consumers} (${describe(last)})`
  }
  const at = points[stop] as ScalePoint
  const total = at.consumerCores + (Number.isFinite(at.brokerCores) ? at.brokerCores : 0)
  const cause =
    total >= 0.85 * cpus
      ? `the machine's ${cpus} cores (${fmt(total)} busy)`
      : at.machineCores >= 0.85 * cpus
        ? `the machine's ${cpus} cores, full with other work too (${fmt(at.machineCores)} busy in all)`
        : at.consumerCores / at.consumers >= 0.9
          ? 'the library (each consumer process at a full core)'
          : 'the broker (neither the cores nor the consumer processes are full: the consumers wait for deliveries)'
  return `${label} (${unit}): ${series}: growth stops at ${at.consumers} ${unit} (×${fmt(at.rate / (points[stop - 1] as ScalePoint).rate)} over ${(points[stop - 1] as ScalePoint).consumers}), with ${describe(at)}: bound by ${cause}`
}
