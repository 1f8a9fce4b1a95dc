import { randomUUID } from 'node:crypto'
import amqplib, { type ConfirmChannel, type ConsumeMessage } from 'amqplib'
import { type OrderedQueue } from '@acemq/core'
import { partitionFor } from '@acemq/core/spi'
import { runInChild } from '../internal/child.js'
import { AMQP_URL } from '../internal/config.js'
import { Countdown, openAceMq } from '../internal/contestants.js'
import { confirmPublish, queueName, windowed } from '../internal/broker.js'
import { envelopeHeaders, order } from '../internal/messages.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { check, cpuPerMessage, rates, row, type ProfileResult } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'

/** The partition counts measured, each against raw amqplib doing the same. */
const PARTITION_COUNTS = [1, 4, 16] as const

const VARIANTS = ['acemq', 'amqplib'] as const
type Variant = (typeof VARIANTS)[number]

/** Parameters of an ordered drain: warm-up partitions drained first, then the measured ones. */
export interface OrderedParams {
  readonly warmupName: string
  readonly warmup: number
  readonly name: string
  readonly count: number
  readonly partitions: number
}

/** What a drain reports: its time, and whether every key came in order. */
interface OrderedMeasured extends Measured {
  readonly outOfOrder: number
}

/** The body of a benchmark entry: a key, its sequence number, and the usual ~300-byte order. */
interface KeyedEntry {
  readonly key: string
  readonly seq: number
  readonly order: ReturnType<typeof order>
}

/** Checks each key's sequence as a real ordered consumer would; counts what came out of turn. */
class OrderCheck {
  readonly #last = new Map<string, number>()
  outOfOrder = 0

  see(entry: KeyedEntry): void {
    if (entry.seq !== (this.#last.get(entry.key) ?? 0) + 1) this.outOfOrder++
    this.#last.set(entry.key, entry.seq)
  }
}

/**
 * The partition queues as `@acemq` declares them (quorum, durable, single active consumer,
 * dead-lettering to `{q}.dlq`), declared the same for both contestants, and filled with `count`
 * entries over `keys` keys, each key's entries in order in its partition (FNV-1a, as `@acemq`).
 */
async function withPartitions<T>(
  what: string,
  partitions: number,
  keys: number,
  counts: { readonly warmup: number; readonly count: number },
  fn: (warmupName: string, name: string) => Promise<T>,
): Promise<T> {
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: 'acemq-bench ordered admin' },
  })
  const channel = await model.createConfirmChannel()
  const names = [queueName(`${what}-warm`), queueName(`${what}-main`)] as const
  const queues = names.flatMap((name) =>
    Array.from({ length: partitions }, (_, p) => `${name}.${p}`),
  )
  try {
    for (const queue of queues) {
      await channel.assertQueue(queue, {
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          'x-single-active-consumer': true,
          'x-dead-letter-exchange': 'acemq.dlx',
          'x-dead-letter-routing-key': `${queue}.dlq`,
        },
      })
    }
    await Promise.all([
      fill(channel, names[0], partitions, keys, counts.warmup),
      fill(channel, names[1], partitions, keys, counts.count),
    ])
    return await fn(names[0], names[1])
  } finally {
    for (const queue of queues) {
      for (const name of [queue, `${queue}.dlq`, `${queue}.parked`]) {
        await channel.deleteQueue(name).catch(() => undefined)
      }
    }
    await model.close().catch(() => undefined)
  }
}

/** Publishes `count` entries, key `i % keys`, each key's sequence in order, as `@acemq` would. */
async function fill(
  channel: ConfirmChannel,
  name: string,
  partitions: number,
  keys: number,
  count: number,
): Promise<void> {
  // One wave per sequence number: a key's entry n+1 is sent once its entry n is confirmed.
  for (let start = 0; start < count; start += keys) {
    const wave = Math.min(keys, count - start)
    await windowed(wave, 1_000, (k) => {
      const i = start + k
      const key = `key-${k}`
      const queue = `${name}.${partitionFor(key, partitions)}`
      const body: KeyedEntry = { key, seq: Math.floor(i / keys) + 1, order: order(i) }
      const id = randomUUID()
      return confirmPublish(channel, '', queue, Buffer.from(JSON.stringify(body)), {
        persistent: true,
        mandatory: true,
        contentType: 'application/json',
        messageId: id,
        headers: envelopeHeaders(id, name),
      })
    })
  }
}

/** Declares an ordered queue as an application does at start-up: `mq.ordered(name)…declare()`. */
function declareOrdered(
  mq: Awaited<ReturnType<typeof openAceMq>>,
  name: string,
  partitions: number,
): Promise<OrderedQueue<KeyedEntry>> {
  return mq
    .ordered<KeyedEntry>(name)
    .partitions(partitions)
    .keyedBy((entry) => entry.key)
    .declare()
}

/** Drains a declared ordered queue with `@acemq`: `consume(handler)`, then `close()`. */
async function drainOrderedAceMq(
  ledger: OrderedQueue<KeyedEntry>,
  count: number,
): Promise<{ ms: number; outOfOrder: number }> {
  const countdown = new Countdown(count)
  const order = new OrderCheck()
  const consumer = await ledger.consume((message) => {
    order.see(message.payload)
    countdown.tick()
  })
  const ms = await countdown.done
  await consumer.close()
  return { ms, outOfOrder: order.outOfOrder }
}

/** The same by hand: a channel per partition, `prefetch(1)`, `JSON.parse`, order check, ack. */
async function drainOrderedRaw(
  model: amqplib.ChannelModel,
  name: string,
  partitions: number,
  count: number,
): Promise<{ ms: number; outOfOrder: number }> {
  const countdown = new Countdown(count)
  const order = new OrderCheck()
  const channels = await Promise.all(
    Array.from({ length: partitions }, async (_, p) => {
      const channel = await model.createChannel()
      await channel.prefetch(1, false)
      await channel.consume(`${name}.${p}`, (message: ConsumeMessage | null) => {
        if (message === null) return
        order.see(JSON.parse(message.content.toString('utf8')) as KeyedEntry)
        channel.ack(message)
        countdown.tick()
      })
      return channel
    }),
  )
  const ms = await countdown.done
  await Promise.all(channels.map((channel) => channel.close()))
  return { ms, outOfOrder: order.outOfOrder }
}

const drainWithAceMq: Worker = async (params, { profile }) => {
  const p = params as OrderedParams
  const mq = await openAceMq(`ordered ${p.partitions}`)
  try {
    // Declared before the clock starts, as at an application's start-up: the raw side's
    // queues are declared by the parent, and the comparison is of the consumption.
    const warmup = await declareOrdered(mq, p.warmupName, p.partitions)
    const ledger = await declareOrdered(mq, p.name, p.partitions)
    await drainOrderedAceMq(warmup, p.warmup)
    collectGarbage()
    let outOfOrder = 0
    const result = await measured(profile, async () => {
      const run = await drainOrderedAceMq(ledger, p.count)
      outOfOrder = run.outOfOrder
      return run.ms
    })
    return { ...result, outOfOrder } satisfies OrderedMeasured
  } finally {
    await mq.close()
  }
}

const drainWithAmqplib: Worker = async (params, { profile }) => {
  const p = params as OrderedParams
  // Nagle off, as the transport has it: with prefetch 1 the broker waits for each ack, and the
  // comparison is of the libraries, not of their socket defaults.
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: `acemq-bench ordered raw ${p.partitions}` },
    noDelay: true,
  })
  try {
    await drainOrderedRaw(model, p.warmupName, p.partitions, p.warmup)
    collectGarbage()
    let outOfOrder = 0
    const result = await measured(profile, async () => {
      const run = await drainOrderedRaw(model, p.name, p.partitions, p.count)
      outOfOrder = run.outOfOrder
      return run.ms
    })
    return { ...result, outOfOrder } satisfies OrderedMeasured
  } finally {
    await model.close()
  }
}

const WORKERS: Record<Variant, Worker> = { acemq: drainWithAceMq, amqplib: drainWithAmqplib }

function measure(
  context: RunContext,
  variant: Variant,
  partitions: number,
  count: number,
  profile?: string,
): Promise<OrderedMeasured> {
  const { sizes } = context
  return withPartitions(
    `ordered-${variant}-${partitions}`,
    partitions,
    sizes.orderedKeys,
    { warmup: sizes.orderedWarmup, count },
    (warmupName, name) =>
      runInChild<OrderedMeasured>({
        worker: `ordered:${variant}`,
        params: {
          warmupName,
          warmup: sizes.orderedWarmup,
          name,
          count,
          partitions,
        } satisfies OrderedParams,
        ...(profile !== undefined && { profile }),
      }),
  )
}

export const ordered: Comparison = {
  id: 'ordered',
  title: '5. Ordered queue, 1,000 keys, prefetch 1 per partition',
  workers: Object.fromEntries(VARIANTS.map((v) => [`ordered:${v}`, WORKERS[v]])),

  async run(context) {
    const { sizes, log } = context
    const count = sizes.ordered
    const sections = []
    const profiles: ProfileResult[] = []
    for (const partitions of PARTITION_COUNTS) {
      const runs = await interleave({
        name: `ordered ×${partitions}`,
        variants: VARIANTS,
        rounds: sizes.rounds,
        unit: 'ms',
        log,
        measure: (variant) => measure(context, variant, partitions, count),
        recover: context.recover,
      })
      const outOfOrder = [...runs.acemq, ...runs.amqplib].reduce((n, r) => n + r.outOfOrder, 0)
      if (outOfOrder > 0) throw new Error(`${outOfOrder} entries came out of order`)
      const perSecond = { acemq: rates(runs.acemq, count), amqplib: rates(runs.amqplib, count) }
      const cpu = {
        acemq: cpuPerMessage(runs.acemq, count),
        amqplib: cpuPerMessage(runs.amqplib, count),
      }
      const target = check(
        `@acemq ordered throughput vs raw amqplib, ${partitions} partition(s)`,
        '@acemq msgs/s ÷ amqplib msgs/s, per round',
        perRound(perSecond.acemq, perSecond.amqplib, div),
        '>=',
        0.85,
      )
      if (shouldProfile(context, target.met)) {
        profiles.push(
          await profileRun(
            context,
            `ordered-${partitions}-acemq`,
            `@acemq ordered queue, ${partitions} partition(s), draining ${count} entries`,
            count,
            (file) => measure(context, 'acemq', partitions, count, file),
          ),
          await profileRun(
            context,
            `ordered-${partitions}-amqplib`,
            `raw amqplib, ${partitions} channel(s) with prefetch 1, draining ${count} entries (the reference)`,
            count,
            (file) => measure(context, 'amqplib', partitions, count, file),
          ),
        )
      }
      sections.push({
        title: `${partitions} partition${partitions === 1 ? '' : 's'}`,
        setup: [
          `${count.toLocaleString('en-US')} entries over ${sizes.orderedKeys.toLocaleString('en-US')} keys, each key's entries in order in its partition (FNV-1a of the key, as \`@acemq\` sends them), in ${partitions} quorum partition queue(s) with a single active consumer, filled before the run; ${sizes.orderedWarmup.toLocaleString('en-US')} more in warm-up partitions drained first in the same process.`,
          `\`@acemq\`: \`mq.ordered(name).partitions(${partitions}).keyedBy(…).declare()\` before the run (as at start-up: the raw side's queues are declared by the parent), then \`consume()\` with a handler that checks each key's order. amqplib: one channel per partition with \`prefetch(1)\`, \`JSON.parse\`, the same order check, \`ack\`; both with Nagle's algorithm off (\`noDelay\`, the transport's default), since with prefetch 1 the broker waits for every ack.`,
          "Timed from the first delivery to the last ack; CPU from the consumer's start to its close, on both sides. Every entry of every run came in order.",
        ],
        rows: [
          row('@acemq', 'msgs/s', perSecond.acemq),
          row('amqplib (raw)', 'msgs/s', perSecond.amqplib),
          row('@acemq ÷ amqplib', '×', perRound(perSecond.acemq, perSecond.amqplib, div), true),
          row('@acemq CPU', 'µs/msg', cpu.acemq),
          row('amqplib CPU', 'µs/msg', cpu.amqplib),
          row('@acemq CPU ÷ amqplib CPU', '×', perRound(cpu.acemq, cpu.amqplib, div), true),
        ],
        checks: [target],
        notes: [],
      })
    }
    return { id: 'ordered', title: this.title, sections, profiles }
  },
}
