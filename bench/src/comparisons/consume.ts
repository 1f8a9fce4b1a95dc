import { runInChild } from '../internal/child.js'
import { ConsumerOptions } from '@acemq/core'
import {
  awaitingHandler,
  drainAceMq,
  drainRaw,
  openAceMq,
  openRaw,
} from '../internal/contestants.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { check, cpuPerMessage, rates, row, type ProfileResult } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  withWarmupAndMain,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'

/** Parameters of a drain worker: a warm-up queue drained first, then the measured one. */
export interface DrainParams {
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
  /** The handler awaits a resolved promise before returning (default: returns at once). */
  readonly awaiting?: boolean
}

const VARIANTS = ['acemq', 'amqplib', 'acemq-sync', 'amqplib-sync', 'rascal'] as const
type Variant = (typeof VARIANTS)[number]

/**
 * Drains with `@acemq`: `ConsumerOptions.defaults().withPrefetch(100)`, a handler that does
 * nothing, or with `awaiting` one that awaits a resolved promise.
 */
export const drainWithAceMq: Worker = async (params, { profile }) => {
  const p = params as DrainParams
  const mq = await openAceMq('consume')
  const options = ConsumerOptions.defaults().withPrefetch(100)
  const handler = p.awaiting === true ? awaitingHandler : undefined
  try {
    await drainAceMq(mq, p.warmupQueue, p.warmup, options, handler)
    collectGarbage()
    return await measured(profile, () => drainAceMq(mq, p.queue, p.count, options, handler))
  } finally {
    await mq.close()
  }
}

/** Drains with raw amqplib: `channel.prefetch(100)`, `JSON.parse`, ack (after an await with `awaiting`). */
export const drainWithAmqplib: Worker = async (params, { profile }) => {
  const p = params as DrainParams
  const raw = await openRaw('consume')
  const awaiting = p.awaiting === true
  try {
    await drainRaw(raw, p.warmupQueue, p.warmup, 100, awaiting)
    collectGarbage()
    return await measured(profile, () => drainRaw(raw, p.queue, p.count, 100, awaiting))
  } finally {
    await raw.model.close()
  }
}

/** Drains with rascal: a subscription with prefetch 100 (rascal parses the JSON), ack. */
const drainWithRascal: Worker = async (params, { profile }) => {
  const p = params as DrainParams
  const { drainRascal, openRascal } = await import('../internal/rascal-contestant.js')
  const broker = await openRascal([p.warmupQueue, p.queue])
  try {
    await drainRascal(broker, p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(profile, () => drainRascal(broker, p.queue, p.count))
  } finally {
    await broker.shutdown()
  }
}

const WORKERS: Record<Variant, Worker> = {
  acemq: drainWithAceMq,
  amqplib: drainWithAmqplib,
  'acemq-sync': drainWithAceMq,
  'amqplib-sync': drainWithAmqplib,
  rascal: drainWithRascal,
}

/** The headline variants run an awaiting handler; the `-sync` ones the synchronous fast path. */
const AWAITING: Record<Variant, boolean> = {
  acemq: true,
  amqplib: true,
  'acemq-sync': false,
  'amqplib-sync': false,
  rascal: false,
}

/** Fills a warm-up and a measured queue, drains them in a child, deletes them; returns ms. */
async function measure(
  context: RunContext,
  variant: Variant,
  count: number,
  profile?: string,
): Promise<Measured> {
  const { admin, sizes } = context
  return withWarmupAndMain(admin, `consume-${variant}`, sizes.warmup, count, (warmupQueue, queue) =>
    runInChild<Measured>({
      worker: `consume:${variant}`,
      params: {
        warmupQueue,
        warmup: sizes.warmup,
        queue,
        count,
        awaiting: AWAITING[variant],
      } satisfies DrainParams,
      ...(profile !== undefined && { profile }),
    }),
  )
}

export const consume: Comparison = {
  id: 'consume',
  title: '1. Consume, acked, JSON payload, prefetch 100',
  workers: Object.fromEntries(VARIANTS.map((v) => [`consume:${v}`, WORKERS[v]])),

  async run(context) {
    const { sizes, log } = context
    const count = sizes.consume
    const runs = await interleave({
      name: 'consume',
      variants: VARIANTS,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: (variant) => measure(context, variant, count),
      recover: context.recover,
    })
    const perSecond = Object.fromEntries(VARIANTS.map((v) => [v, rates(runs[v], count)])) as Record<
      Variant,
      number[]
    >
    const cpu = Object.fromEntries(
      VARIANTS.map((v) => [v, cpuPerMessage(runs[v], count)]),
    ) as Record<Variant, number[]>
    // The headline: both sides with a handler that awaits (issue 32), the way most handlers are.
    const target = check(
      '@acemq consumer throughput vs raw amqplib',
      '@acemq msgs/s ÷ amqplib msgs/s, per round',
      perRound(perSecond.acemq, perSecond.amqplib, (a, b) => a / b),
      '>=',
      // Issue 21: at least raw amqplib's throughput (the first wave asked 0.85), and at most
      // 1.2 × its CPU per message.
      1.0,
    )
    const cpuTarget = check(
      '@acemq consumer CPU per message vs raw amqplib',
      '@acemq CPU µs/msg ÷ amqplib CPU µs/msg, per round',
      perRound(cpu.acemq, cpu.amqplib, div),
      '<=',
      1.2,
    )
    const profiles: ProfileResult[] = []
    if (shouldProfile(context, target.met && cpuTarget.met)) {
      profiles.push(
        await profileRun(
          context,
          'consume-acemq',
          `@acemq consumer draining ${sizes.profile} messages`,
          sizes.profile,
          (file) => measure(context, 'acemq', sizes.profile, file),
        ),
        await profileRun(
          context,
          'consume-amqplib',
          `raw amqplib consumer draining ${sizes.profile} messages (the reference)`,
          sizes.profile,
          (file) => measure(context, 'amqplib', sizes.profile, file),
        ),
      )
    }
    return {
      id: 'consume',
      title: this.title,
      sections: [
        {
          title: 'Throughput',
          setup: [
            `Each contestant drains ${count.toLocaleString('en-US')} messages from its own freshly filled durable classic queue, after draining ${sizes.warmup.toLocaleString('en-US')} from a warm-up queue in the same process.`,
            'The messages are identical for all: a ~300-byte JSON order, persistent, with the `x-acemq-*` envelope headers `@acemq` writes.',
            '`@acemq`: `ConsumerOptions.defaults().withPrefetch(100)` (concurrency 1). amqplib: `channel.prefetch(100)`, `JSON.parse`, `ack`. rascal: a subscription with `prefetch: 100`, `ackOrNack()`.',
            'The headline rows (`@acemq`, `amqplib (raw)`) and the targets use a handler that awaits before returning (`async () => { await Promise.resolve() }`; amqplib: the parse and ack in an async function after the same await), as most real handlers do. The `sync` rows are the synchronous fast path (a handler that returns at once, the ack written in the same turn), reported beside it; rascal runs its usual callback.',
            "Timed from the first delivery to the last ack (the clock stops on the next event-loop turn after the last message is handled). CPU: user + system time of the contestant's process over the same stretch, per message — it moves much less with the machine's other load than wall time does.",
          ],
          rows: [
            row('@acemq', 'msgs/s', perSecond.acemq),
            row('amqplib (raw)', 'msgs/s', perSecond.amqplib),
            row('@acemq sync', 'msgs/s', perSecond['acemq-sync']),
            row('amqplib sync', 'msgs/s', perSecond['amqplib-sync']),
            row('rascal', 'msgs/s', perSecond.rascal),
            row(
              '@acemq sync ÷ amqplib sync',
              '×',
              perRound(perSecond['acemq-sync'], perSecond['amqplib-sync'], div),
              true,
            ),
            row('rascal ÷ amqplib', '×', perRound(perSecond.rascal, perSecond.amqplib, div), true),
            row('@acemq CPU', 'µs/msg', cpu.acemq),
            row('amqplib CPU', 'µs/msg', cpu.amqplib),
            row('@acemq sync CPU', 'µs/msg', cpu['acemq-sync']),
            row('amqplib sync CPU', 'µs/msg', cpu['amqplib-sync']),
            row('rascal CPU', 'µs/msg', cpu.rascal),
            row('@acemq CPU ÷ amqplib CPU', '×', perRound(cpu.acemq, cpu.amqplib, div), true),
            row(
              '@acemq sync CPU ÷ amqplib sync CPU',
              '×',
              perRound(cpu['acemq-sync'], cpu['amqplib-sync'], div),
              true,
            ),
          ],
          checks: [target, cpuTarget],
          notes: [],
        },
      ],
      profiles,
    }
  },
}
