import { once } from 'node:events'
import os from 'node:os'
import amqplib from 'amqplib'
import type { QueueType } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { AMQP_URL } from '../internal/config.js'
import { Countdown, openRaw } from '../internal/contestants.js'
import { ceilingFindings } from '../internal/findings.js'
import { acemqShapedMessage } from '../internal/messages.js'
import { pidListeningOn, portOf } from '../internal/proc-cpu.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import {
  check,
  cpuPerMessage,
  rates,
  row,
  type ProfileResult,
  type Section,
} from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'

// Issue 32: what the broker moves with nothing holding it back — raw amqplib publishing without
// confirms, consuming with noAck — and @acemq (confirms, acks, its envelope) as a fraction of it,
// on a classic and a quorum queue; with the broker's own CPU (beam.smp, from /proc) beside the
// client's.

interface CeilingParams {
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
}

const VARIANTS = [
  'publish-ceiling',
  'publish-raw',
  'publish-acemq',
  'consume-ceiling',
  'consume-raw',
  'consume-acemq',
] as const
type Variant = (typeof VARIANTS)[number]
const QUEUE_TYPES: readonly QueueType[] = ['classic', 'quorum']

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Raw amqplib, no confirms: the same message `@acemq` sends (JSON order, persistent, mandatory,
 * envelope headers), written as fast as the socket takes it (waiting for `drain` when amqplib
 * says its buffer is full); timed until the queue holds all of them (polled on a second channel),
 * so that what is measured is what the broker took, not what the client buffered.
 */
const publishCeiling: Worker = async (params, { profile }) => {
  const p = params as CeilingParams
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: 'acemq-bench ceiling publish' },
  })
  try {
    const channel = await model.createChannel()
    const probe = await model.createChannel()
    const run = async (queue: string, count: number): Promise<number> => {
      const started = performance.now()
      for (let i = 0; i < count; i++) {
        const { content, options } = acemqShapedMessage(i, queue)
        if (!channel.publish('', queue, content, options)) await once(channel, 'drain')
      }
      while ((await probe.checkQueue(queue)).messageCount < count) await sleep(2)
      return performance.now() - started
    }
    await run(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(profile, () => run(p.queue, p.count))
  } finally {
    await model.close()
  }
}

/** Raw amqplib, `noAck: true`: the broker pushes without waiting for anything. */
const consumeCeiling: Worker = async (params, { profile }) => {
  const p = params as CeilingParams
  const raw = await openRaw('ceiling consume')
  const run = async (queue: string, count: number): Promise<number> => {
    const countdown = new Countdown(count)
    const { consumerTag } = await raw.channel.consume(
      queue,
      (message) => {
        if (message !== null) countdown.tick()
      },
      { noAck: true },
    )
    const ms = await countdown.done
    await raw.channel.cancel(consumerTag)
    return ms
  }
  try {
    await run(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(profile, () => run(p.queue, p.count))
  } finally {
    await raw.model.close()
  }
}

const LABELS: Record<Variant, string> = {
  'publish-ceiling': 'raw no-confirm publish (ceiling)',
  'publish-raw': 'raw confirmed publish',
  'publish-acemq': '@acemq confirmed publish',
  'consume-ceiling': 'raw noAck consume (ceiling)',
  'consume-raw': 'raw acked consume',
  'consume-acemq': '@acemq acked consume',
}

/** The ratios the table shows beside the rates: each to its ceiling. */
const RATIOS: readonly (readonly [Variant, Variant])[] = [
  ['publish-raw', 'publish-ceiling'],
  ['consume-raw', 'consume-ceiling'],
  ['publish-acemq', 'publish-ceiling'],
  ['consume-acemq', 'consume-ceiling'],
]

/**
 * Which worker runs a variant: the `@acemq` sides and raw amqplib with confirms or acks (the
 * protocol's own cost, without the library) are comparison 1's and 2's own.
 */
const WORKER_OF: Record<Variant, string> = {
  'publish-ceiling': 'ceiling:publish',
  'publish-raw': 'publish:amqplib',
  'publish-acemq': 'publish:acemq',
  'consume-ceiling': 'ceiling:consume',
  'consume-raw': 'consume:amqplib',
  'consume-acemq': 'consume:acemq',
}

async function measure(
  context: RunContext,
  type: QueueType,
  variant: Variant,
  count: number,
  brokerPid: number | undefined,
  profile?: string,
): Promise<Measured> {
  const { admin, sizes } = context
  const consuming = variant.startsWith('consume')
  const warmQueue = await admin.queue(`ceiling-${type}-${variant}-warm`, type)
  const queue = await admin.queue(`ceiling-${type}-${variant}`, type)
  try {
    if (consuming)
      await Promise.all([admin.fill(warmQueue, sizes.warmup), admin.fill(queue, count)])
    return await runInChild<Measured>({
      worker: WORKER_OF[variant],
      params: {
        warmupQueue: warmQueue,
        warmup: sizes.warmup,
        queue,
        count,
        // comparison 2's window for @acemq publish; comparison 1's awaiting handler for consume
        window: sizes.publishWindow,
        awaiting: true,
      },
      ...(brokerPid !== undefined && { brokerPids: [brokerPid] }),
      ...(profile !== undefined && { profile }),
    })
  } finally {
    await admin.remove(queue, warmQueue)
  }
}

function perMessage(values: readonly Measured[], count: number, key: 'brokerCpuMs'): number[] {
  return values.map((m) => ((m[key] ?? Number.NaN) * 1000) / count)
}

async function runType(
  context: RunContext,
  type: QueueType,
  brokerPid: number | undefined,
): Promise<{ section: Section; missed: boolean }> {
  const { sizes, log } = context
  const count = sizes.ceiling
  const runs = await interleave({
    name: `ceiling ${type}`,
    variants: VARIANTS,
    rounds: sizes.rounds,
    unit: 'ms',
    log,
    measure: (variant) => measure(context, type, variant, count, brokerPid),
    recover: context.recover,
  })
  const rate = Object.fromEntries(VARIANTS.map((v) => [v, rates(runs[v], count)])) as Record<
    Variant,
    number[]
  >
  const cpu = Object.fromEntries(VARIANTS.map((v) => [v, cpuPerMessage(runs[v], count)])) as Record<
    Variant,
    number[]
  >
  const broker = Object.fromEntries(
    VARIANTS.map((v) => [v, perMessage(runs[v], count, 'brokerCpuMs')]),
  ) as Record<Variant, number[]>
  const publish = check(
    `@acemq confirmed publish vs the no-confirm ceiling, ${type} queue`,
    '@acemq publisher.send() msgs/s ÷ raw amqplib no-confirm msgs/s, per round',
    perRound(rate['publish-acemq'], rate['publish-ceiling'], div),
    '>=',
    0.8,
  )
  const consume = check(
    `@acemq acked consume vs the no-ack ceiling, ${type} queue`,
    '@acemq msgs/s (awaiting handler, prefetch 100) ÷ raw amqplib noAck msgs/s, per round',
    perRound(rate['consume-acemq'], rate['consume-ceiling'], div),
    '>=',
    0.8,
  )
  const medianOf = (values: readonly number[]): number => row('', '', values).median
  const findings = ceilingFindings({
    type,
    cpus: os.availableParallelism(),
    publish: {
      ratio: publish.ratio,
      protocolRatio: medianOf(perRound(rate['publish-raw'], rate['publish-ceiling'], div)),
      wallUs: [1e6 / medianOf(rate['publish-acemq']), 1e6 / medianOf(rate['publish-ceiling'])],
      clientUs: [medianOf(cpu['publish-acemq']), medianOf(cpu['publish-ceiling'])],
      brokerUs: [medianOf(broker['publish-acemq']), medianOf(broker['publish-ceiling'])],
    },
    consume: {
      ratio: consume.ratio,
      protocolRatio: medianOf(perRound(rate['consume-raw'], rate['consume-ceiling'], div)),
      wallUs: [1e6 / medianOf(rate['consume-acemq']), 1e6 / medianOf(rate['consume-ceiling'])],
      clientUs: [medianOf(cpu['consume-acemq']), medianOf(cpu['consume-ceiling'])],
      brokerUs: [medianOf(broker['consume-acemq']), medianOf(broker['consume-ceiling'])],
    },
  })
  const section: Section = {
    title: `${type === 'classic' ? 'Classic' : 'Quorum'} queue`,
    setup: [
      `${count.toLocaleString('en-US')} messages per run (the ~300-byte JSON order with the envelope headers, persistent), each contestant in its own process after ${sizes.warmup.toLocaleString('en-US')} on a warm-up queue; a fresh durable ${type} queue per run.`,
      "Publish ceiling: raw amqplib `channel.publish` without confirms (waiting for `drain` when its buffer is full), timed until the queue holds every message. `@acemq`: `publisher.send()` with confirms, 1,000 outstanding (comparison 2); raw confirmed: amqplib's confirm channel, the same window and bytes (comparison 2) — what confirms cost without the library.",
      'Consume ceiling: raw amqplib `consume` with `noAck: true`, counting. `@acemq`: prefetch 100, acks, a handler that awaits (comparison 1); raw acked: amqplib with prefetch 100, the same awaiting handler, an ack per message (comparison 1) — what acks and the prefetch window cost without the library.',
      `Broker CPU: RabbitMQ's Erlang VM (\`beam.smp\`, pid ${brokerPid ?? 'not found'}) user + system time from \`/proc/<pid>/stat\` over the measured stretch (10 ms ticks), per message; client CPU: the contestant's process.`,
    ],
    rows: [
      ...VARIANTS.map((v) => row(LABELS[v], 'msgs/s', rate[v])),
      ...RATIOS.map(([a, b]) =>
        row(`${LABELS[a]} ÷ ${LABELS[b]}`, '×', perRound(rate[a], rate[b], div), true),
      ),
      ...VARIANTS.map((v) => row(`${LABELS[v]}: client CPU`, 'µs/msg', cpu[v])),
      ...VARIANTS.map((v) => row(`${LABELS[v]}: broker CPU`, 'µs/msg', broker[v])),
      ...RATIOS.filter(([a]) => a.endsWith('acemq')).map(([a, b]) =>
        row(
          `${LABELS[a]}: broker CPU ÷ ${LABELS[b]}'s`,
          '×',
          perRound(broker[a], broker[b], div),
          true,
        ),
      ),
    ],
    checks: [publish, consume],
    notes: [],
    findings,
  }
  return { section, missed: !(publish.met && consume.met) }
}

export const ceiling: Comparison = {
  id: 'ceiling',
  title: "8. Against the broker's ceiling: no confirms, no acks",
  workers: { 'ceiling:publish': publishCeiling, 'ceiling:consume': consumeCeiling },

  async run(context) {
    const brokerPid = pidListeningOn(portOf(AMQP_URL))
    if (brokerPid === undefined) context.log('  (broker pid not found: no broker CPU)')
    const sections: Section[] = []
    let missed = false
    for (const type of QUEUE_TYPES) {
      const result = await runType(context, type, brokerPid)
      sections.push(result.section)
      missed ||= result.missed
    }
    const profiles: ProfileResult[] = []
    if (shouldProfile(context, !missed)) {
      const n = context.sizes.ceiling
      for (const variant of ['consume-acemq', 'publish-acemq', 'consume-ceiling'] as const) {
        profiles.push(
          await profileRun(
            context,
            `ceiling-${variant}`,
            `${variant === 'consume-ceiling' ? 'raw noAck consume (the ceiling)' : variant === 'consume-acemq' ? '@acemq acked consume, awaiting handler' : '@acemq confirmed publish'}, ${n} messages, classic queue`,
            n,
            (file) => measure(context, 'classic', variant, n, brokerPid, file),
          ),
        )
      }
    }
    return { id: 'ceiling', title: this.title, sections, profiles }
  },
}
