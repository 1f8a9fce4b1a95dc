import { randomUUID } from 'node:crypto'
import amqplib from 'amqplib'
import { ConsumerOptions } from '@acemq/core'
import { runInChild } from '../internal/child.js'
import { AMQP_URL, QUICK } from '../internal/config.js'
import { openAceMq } from '../internal/contestants.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { check, cpuPerMessage, rates, row, type ProfileResult } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, median, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'

const VARIANTS = ['acemq', 'direct'] as const
type Variant = (typeof VARIANTS)[number]

/** Requests per round (in flight at once for throughput; one at a time for latency). */
const SIZES = QUICK
  ? { throughput: 1_000, latency: 200, warmup: 200, inFlight: 50 }
  : { throughput: 10_000, latency: 2_000, warmup: 1_000, inFlight: 50 }

interface RpcParams {
  readonly queue: string
  readonly count: number
  readonly warmup: number
  /** Requests outstanding at once: `inFlight` for throughput, 1 for latency. */
  readonly inFlight: number
}

/** A round: wall time of all the requests, CPU, and the requests' own latencies. */
interface RpcMeasured extends Measured {
  readonly p50: number
  readonly p99: number
}

/** The request both sides send: a small JSON quote. The reply doubles its quantity. */
const QUOTE = { sku: 'sku-17', quantity: 3, customer: 'customer-42' }

/**
 * Sends `count` requests through `request`, `inFlight` at a time, and returns the wall time and
 * each request's latency (ms).
 */
async function drive(
  request: () => Promise<unknown>,
  count: number,
  inFlight: number,
): Promise<{ ms: number; latencies: number[] }> {
  const latencies: number[] = []
  let next = 0
  const started = performance.now()
  const lane = async (): Promise<void> => {
    while (next < count) {
      next++
      const sent = performance.now()
      await request()
      latencies.push(performance.now() - sent)
    }
  }
  await Promise.all(Array.from({ length: inFlight }, lane))
  return { ms: performance.now() - started, latencies }
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN
}

async function timed(
  profile: string | undefined,
  p: RpcParams,
  request: () => Promise<unknown>,
): Promise<RpcMeasured> {
  await drive(request, p.warmup, p.inFlight)
  collectGarbage()
  let latencies: number[] = []
  const result = await measured(profile, async () => {
    const run = await drive(request, p.count, p.inFlight)
    latencies = run.latencies
    return run.ms
  })
  const sorted = [...latencies].sort((a, b) => a - b)
  return { ...result, p50: median(sorted), p99: percentile(sorted, 0.99) }
}

/** `mq.respond` on the queue (the parent declared it), `mq.requester().request` from a second connection. */
const rpcWithAceMq: Worker = async (params, { profile }) => {
  const p = params as RpcParams
  const server = await openAceMq('rpc responder')
  const client = await openAceMq('rpc requester')
  try {
    const responder = await server.respond<typeof QUOTE, number>(
      p.queue,
      { consumer: ConsumerOptions.defaults().withPrefetch(100).withConcurrency(100) },
      (message) => message.payload.quantity * 2,
    )
    const requester = client.requester()
    const result = await timed(profile, p, () => requester.request('', p.queue, QUOTE))
    await requester.close()
    await responder.close()
    // The parent removes the reply queue (it would expire after 10 minutes anyway).
    return { ...result, replyQueue: requester.replyQueue }
  } finally {
    await client.close()
    await server.close()
  }
}

/**
 * The hand-written client, as amqplib's direct reply-to recipe has it: the responder consumes
 * the queue (prefetch 100), replies with `sendToQueue(replyTo, …, { correlationId })` and
 * acks; the requester consumes `amq.rabbitmq.reply-to` in no-ack mode on the channel it
 * publishes on, matching replies by correlation id in a Map.
 */
const rpcByHand: Worker = async (params, { profile }) => {
  const p = params as RpcParams
  const server = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: 'acemq-bench rpc responder by hand' },
    noDelay: true,
  })
  const client = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: 'acemq-bench rpc requester by hand' },
    noDelay: true,
  })
  try {
    const serverChannel = await server.createChannel()
    await serverChannel.prefetch(100)
    await serverChannel.consume(p.queue, (message) => {
      if (message === null) return
      const quote = JSON.parse(message.content.toString()) as typeof QUOTE
      serverChannel.sendToQueue(
        message.properties.replyTo as string,
        Buffer.from(JSON.stringify(quote.quantity * 2)),
        {
          correlationId: message.properties.correlationId as string,
          contentType: 'application/json',
        },
      )
      serverChannel.ack(message)
    })
    const channel = await client.createChannel()
    const pending = new Map<string, (reply: unknown) => void>()
    await channel.consume(
      'amq.rabbitmq.reply-to',
      (message) => {
        if (message === null) return
        const id = message.properties.correlationId as string
        pending.get(id)?.(JSON.parse(message.content.toString()))
        pending.delete(id)
      },
      { noAck: true },
    )
    const request = (): Promise<unknown> =>
      new Promise((resolve) => {
        const id = randomUUID()
        pending.set(id, resolve)
        channel.sendToQueue(p.queue, Buffer.from(JSON.stringify(QUOTE)), {
          replyTo: 'amq.rabbitmq.reply-to',
          correlationId: id,
          contentType: 'application/json',
          persistent: true,
        })
      })
    return await timed(profile, p, request)
  } finally {
    await client.close()
    await server.close()
  }
}

const WORKERS: Record<Variant, Worker> = { acemq: rpcWithAceMq, direct: rpcByHand }

async function measure(
  context: RunContext,
  variant: Variant,
  inFlight: number,
  count: number,
  profile?: string,
): Promise<RpcMeasured> {
  const { admin } = context
  const queue = await admin.queue(`rpc-${variant}`)
  try {
    const result = await runInChild<RpcMeasured & { replyQueue?: string }>({
      worker: `rpc:${variant}`,
      params: { queue, count, warmup: SIZES.warmup, inFlight } satisfies RpcParams,
      ...(profile !== undefined && { profile }),
    })
    if (result.replyQueue !== undefined) await admin.remove(result.replyQueue)
    return result
  } finally {
    await admin.remove(queue)
  }
}

export const rpc: Comparison = {
  id: 'rpc',
  title:
    '7. Request/reply: @acemq requester and responder vs a hand-written direct reply-to client',
  workers: Object.fromEntries(VARIANTS.map((v) => [`rpc:${v}`, WORKERS[v]])),

  async run(context) {
    const { sizes, log } = context
    const throughput = await interleave({
      name: `rpc ${SIZES.inFlight} in flight`,
      variants: VARIANTS,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: (variant) => measure(context, variant, SIZES.inFlight, SIZES.throughput),
      recover: context.recover,
    })
    const latency = await interleave({
      name: 'rpc one at a time',
      variants: VARIANTS,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: (variant) => measure(context, variant, 1, SIZES.latency),
      recover: context.recover,
    })
    const perSecond = {
      acemq: rates(throughput.acemq, SIZES.throughput),
      direct: rates(throughput.direct, SIZES.throughput),
    }
    const p50 = {
      acemq: latency.acemq.map((r) => r.p50 * 1000),
      direct: latency.direct.map((r) => r.p50 * 1000),
    }
    const target = check(
      '@acemq request/reply throughput vs a hand-written direct reply-to client',
      '@acemq requests/s ÷ hand-written requests/s, per round',
      perRound(perSecond.acemq, perSecond.direct, div),
      '>=',
      0.5,
    )
    const profiles: ProfileResult[] = []
    if (shouldProfile(context, target.met)) {
      profiles.push(
        await profileRun(
          context,
          'rpc-acemq',
          `@acemq, ${SIZES.throughput} requests`,
          SIZES.throughput,
          (file) => measure(context, 'acemq', SIZES.inFlight, SIZES.throughput, file),
        ),
      )
    }
    const n = (value: number): string => value.toLocaleString('en-US')
    return {
      id: 'rpc',
      title: this.title,
      sections: [
        {
          title: `${n(SIZES.throughput)} requests, ${SIZES.inFlight} in flight`,
          setup: [
            `One process, two connections (responder, requester) per contestant; a ~60-byte JSON request, a JSON number as the reply; ${n(SIZES.warmup)} requests as a warm-up in the same process.`,
            '`@acemq`: `mq.respond(queue, { consumer: prefetch 100, concurrency 100 }, handler)` and `mq.requester().request()` — confirmed mandatory requests with the full envelope, a reply queue `acemq.reply.{uuid}`, confirmed replies, every request settled once with its timeout armed. Hand-written: amqplib\'s direct reply-to recipe — `sendToQueue(queue, body, { replyTo: "amq.rabbitmq.reply-to", correlationId })` unconfirmed, replies on a no-ack consumer matched in a Map, the responder replying unconfirmed and acking.',
          ],
          rows: [
            row('@acemq', 'requests/s', perSecond.acemq),
            row('direct reply-to by hand', 'requests/s', perSecond.direct),
            row('@acemq ÷ by hand', '×', perRound(perSecond.acemq, perSecond.direct, div), true),
            row('@acemq CPU', 'µs/request', cpuPerMessage(throughput.acemq, SIZES.throughput)),
            row('by hand CPU', 'µs/request', cpuPerMessage(throughput.direct, SIZES.throughput)),
            row(
              '@acemq p99',
              'ms',
              throughput.acemq.map((r) => r.p99),
            ),
            row(
              'by hand p99',
              'ms',
              throughput.direct.map((r) => r.p99),
            ),
          ],
          checks: [target],
          notes: [
            'The difference is what the guarantees cost: two publisher confirms per round trip (request and reply) and the envelope, against none.',
          ],
        },
        {
          title: `${n(SIZES.latency)} requests, one at a time`,
          setup: ['The same contestants, each request sent when the previous reply arrived.'],
          rows: [
            row('@acemq p50', 'µs', p50.acemq),
            row('by hand p50', 'µs', p50.direct),
            row('@acemq p50 ÷ by hand p50', '×', perRound(p50.acemq, p50.direct, div), true),
            row(
              '@acemq p99',
              'ms',
              latency.acemq.map((r) => r.p99),
            ),
            row(
              'by hand p99',
              'ms',
              latency.direct.map((r) => r.p99),
            ),
          ],
          checks: [],
          notes: [],
        },
      ],
      profiles,
    }
  },
}
