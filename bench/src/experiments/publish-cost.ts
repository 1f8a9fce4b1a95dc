// What one confirmed publish costs the publishing process, `@acemq` against raw amqplib sending
// the same bytes (comparison 2's two contestants, nothing else): each variant in a fresh
// process publishes the ~300-byte JSON order with the seven x-acemq-* headers to its own
// durable classic queue, a sliding window of 1,000 awaiting their confirm, and reports its CPU
// (user + system) µs per message over the measured part. Variants run interleaved, the first
// rotating, so load that comes and goes hits each alike.
//   acemq            mq.publisher('', queue).send(order)
//   acemq-nagle      the same on a connection with Nagle on (socketOptions noDelay: false)
//   amqplib          createConfirmChannel(), publish(…, callback), the same message on the wire
//   amqplib-nodelay  the same with Nagle off (socketOptions noDelay, as @acemq connects)
//   amqplib-corked   Nagle off, the socket corked around each pass of amqplib's frame
//                    multiplexer (one write of everything the channels queued in that pass), as
//                    the transport's publish connection did from issue 21's first publish
//                    sitting until it was found to cost throughput (bench/internal/corked-writes.ts)
//   amqplib-direct   Nagle off, each publish's frames written by the transport's own encoder
//                    (internal/publish-frames.ts) instead of amqplib's: the publish connection
//                    as the transport sets it up, under a hand-written publisher
// PUBLISH_COST_PROFILE=dir writes a .cpuprofile of each measured part there.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/publish-cost.ts
import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import amqplib from 'amqplib'
import { writeEachPassAtOnce } from '../internal/corked-writes.js'
import { encodePublishesDirectly } from '../../../packages/transport-amqp/src/internal/publish-frames.js'
import { confirmPublish, windowed } from '../internal/broker.js'
import { AMQP_URL, QUICK } from '../internal/config.js'
import { openAceMq } from '../internal/contestants.js'
import { envelopeHeaders, order, type OrderPlaced } from '../internal/messages.js'
import { collectGarbage, measured } from '../internal/profiler.js'
import { fmt, median } from '../internal/stats.js'
import { runWhenMain, writeResult } from './experiment.js'

const ALL_VARIANTS = [
  'acemq',
  'amqplib',
  'amqplib-nodelay',
  'amqplib-corked',
  'amqplib-direct',
  'acemq-nagle',
] as const
type Variant = (typeof ALL_VARIANTS)[number]
/** PUBLISH_COST_VARIANTS=acemq,amqplib picks some (acemq and amqplib always run). */
const VARIANTS: readonly Variant[] = ALL_VARIANTS.filter(
  (v) =>
    v === 'acemq' ||
    v === 'amqplib' ||
    (process.env['PUBLISH_COST_VARIANTS'] ?? ALL_VARIANTS.join(',')).split(',').includes(v),
)
const COUNT = QUICK ? 2_000 : 30_000
const WARMUP = QUICK ? 500 : 5_000
const ROUNDS = Number(process.env['PUBLISH_COST_ROUNDS'] ?? (QUICK ? 2 : 7))
const WINDOW = 1_000

/** Sends `count` with at most {@link WINDOW} awaiting their confirm; CPU µs per message. */
async function run(
  variant: Variant,
  send: (queue: string) => (i: number) => Promise<unknown>,
  warmupQueue: string,
  queue: string,
): Promise<{ cpu: number; ms: number }> {
  await windowed(WARMUP, WINDOW, send(warmupQueue))
  collectGarbage()
  const dir = process.env['PUBLISH_COST_PROFILE']
  const profile =
    dir === undefined
      ? undefined
      : path.join(dir, `publish-cost-${variant}-${process.pid}.cpuprofile`)
  const result = await measured(profile, async () => {
    const started = performance.now()
    await windowed(COUNT, WINDOW, send(queue))
    return performance.now() - started
  })
  return { cpu: (result.cpuMs * 1000) / COUNT, ms: result.ms }
}

/** One measurement, in this (fresh) process. */
async function child(variant: Variant): Promise<void> {
  const admin = await amqplib.connect(AMQP_URL)
  const channel = await admin.createChannel()
  const warmupQueue = `acemq-bench.publish-cost.${randomUUID()}`
  const queue = `acemq-bench.publish-cost.${randomUUID()}`
  await channel.assertQueue(warmupQueue, { durable: true })
  await channel.assertQueue(queue, { durable: true })
  let result: { cpu: number; ms: number }
  try {
    if (variant === 'acemq' || variant === 'acemq-nagle') {
      const mq = await openAceMq('publish-cost', { nagle: variant === 'acemq-nagle' })
      try {
        result = await run(
          variant,
          (q) => {
            const publisher = mq.publisher<OrderPlaced>('', q)
            return (i) => publisher.send(order(i))
          },
          warmupQueue,
          queue,
        )
      } finally {
        await mq.close()
      }
    } else {
      const model = await amqplib.connect(AMQP_URL, { noDelay: variant !== 'amqplib' })
      // The corked socket the transport once used; the transport's own encoder.
      if (variant === 'amqplib-corked') writeEachPassAtOnce(model)
      if (variant === 'amqplib-direct') encodePublishesDirectly(model)
      try {
        const confirms = await model.createConfirmChannel()
        result = await run(
          variant,
          (q) => (i) => {
            const id = randomUUID()
            return confirmPublish(confirms, '', q, Buffer.from(JSON.stringify(order(i))), {
              persistent: true,
              mandatory: true,
              contentType: 'application/json',
              messageId: id,
              headers: envelopeHeaders(id, q),
            })
          },
          warmupQueue,
          queue,
        )
      } finally {
        await model.close()
      }
    }
    const depth = (await channel.checkQueue(queue)).messageCount
    if (depth !== COUNT) throw new Error(`${variant}: ${depth} of ${COUNT} arrived`)
  } finally {
    await channel.deleteQueue(warmupQueue)
    await channel.deleteQueue(queue)
    await admin.close()
  }
  console.log(JSON.stringify(result))
}

async function main(): Promise<void> {
  const variant = process.argv[2] as Variant | undefined
  if (variant !== undefined) return child(variant)
  const cpu = Object.fromEntries(VARIANTS.map((v) => [v, [] as number[]])) as Record<
    Variant,
    number[]
  >
  const ratios: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const shift = round % VARIANTS.length
    const order = [...VARIANTS.slice(shift), ...VARIANTS.slice(0, shift)]
    const line: string[] = []
    for (const v of order) {
      const child = spawnSync(
        process.execPath,
        [...process.execArgv, '--expose-gc', fileURLToPath(import.meta.url), v],
        { encoding: 'utf8', env: process.env },
      )
      if (child.status !== 0) throw new Error(`${v} failed: ${child.stderr}`)
      const { cpu: us, ms } = JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '{}') as {
        cpu: number
        ms: number
      }
      cpu[v].push(us)
      line.push(`${v} ${fmt(us)} µs (${fmt((COUNT / ms) * 1000)}/s)`)
    }
    const r = (cpu.acemq.at(-1) ?? 0) / (cpu.amqplib.at(-1) ?? 1)
    ratios.push(r)
    console.log(`round ${round + 1}: ${line.join(', ')}; acemq ÷ amqplib ${fmt(r)}`)
  }
  console.log(
    `median µs/msg: ${VARIANTS.map((v) => `${v} ${fmt(median(cpu[v]))}`).join(', ')}; ` +
      `acemq ÷ amqplib, median of per-round ratios ${fmt(median(ratios))}`,
  )
  writeResult('publish-cost', { count: COUNT, rounds: ROUNDS, cpuUsPerMessage: cpu, ratios })
}

runWhenMain(import.meta.url, main)
