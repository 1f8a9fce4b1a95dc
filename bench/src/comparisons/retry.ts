import amqplib, { type Channel, type ConfirmChannel, type ConsumeMessage } from 'amqplib'
import { ConsumerOptions, RetryPolicy, type AceMq, type Consumer } from '@acemq/core'
import { confirmPublish } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { AMQP_URL } from '../internal/config.js'
import {
  Countdown,
  drainAceMq,
  limitedConsumer,
  openAceMq,
  openRaw,
  type LimitedConsumerState,
} from '../internal/contestants.js'
import { collectGarbage, measured, type Measured } from '../internal/profiler.js'
import { row, type ProfileResult, type Section } from '../internal/results.js'
import { interleave } from '../internal/rounds.js'
import { div, perRound } from '../internal/stats.js'
import {
  profileRun,
  shouldProfile,
  withFilledQueue,
  withWarmupAndMain,
  type Comparison,
  type RunContext,
  type Worker,
} from './comparison.js'
import type { DrainParams } from './consume.js'

// ---------------------------------------------------------------------------------------------
// Retry hops

interface HopParams extends DrainParams {
  /** Fail every message's first attempt (true) or ack at once (false). */
  readonly failOnce: boolean
}

const HOP_VARIANTS = ['acemq-ack', 'acemq-retry', 'amqplib-ack', 'amqplib-retry'] as const
type HopVariant = (typeof HOP_VARIANTS)[number]

/** `@acemq` with `RetryPolicy.fixed(2, 1)`: a failed first attempt waits 1 ms, is republished with attempt 2, acked. */
const hopWithAceMq: Worker = async (params, { profile }) => {
  const p = params as HopParams
  const mq = await openAceMq('retry')
  const options = ConsumerOptions.defaults().withPrefetch(100).withRetry(RetryPolicy.fixed(2, 1))
  const handler =
    (countdown: Countdown) => (message: { readonly envelope: { readonly attempt: number } }) => {
      countdown.begin()
      if (p.failOnce && message.envelope.attempt === 1)
        throw new Error('fails on the first attempt')
      countdown.tick()
    }
  try {
    await drainAceMq(mq, p.warmupQueue, p.warmup, options, handler)
    collectGarbage()
    return await measured(profile, () => drainAceMq(mq, p.queue, p.count, options, handler))
  } finally {
    await mq.close()
  }
}

/**
 * The same by hand on amqplib, one message at a time like `@acemq`'s default concurrency 1:
 * on a first attempt wait 1 ms, publish a copy with attempt 2 on a confirm channel of a second
 * connection (as `@acemq` does), ack the original once the copy is confirmed.
 */
const hopWithAmqplib: Worker = async (params, { profile }) => {
  const p = params as HopParams
  const raw = await openRaw('retry')
  const publishModel = await amqplib.connect(AMQP_URL)
  const confirm: ConfirmChannel = await publishModel.createConfirmChannel()
  const drain = async (queue: string, count: number): Promise<number> => {
    const countdown = new Countdown(count)
    const handle = async (channel: Channel, message: ConsumeMessage): Promise<void> => {
      countdown.begin()
      JSON.parse(message.content.toString('utf8'))
      const headers = message.properties.headers ?? {}
      if (p.failOnce && headers['x-acemq-attempt'] === 1) {
        await new Promise((resolve) => setTimeout(resolve, 1))
        await confirmPublish(confirm, '', queue, message.content, {
          persistent: true,
          mandatory: true,
          contentType: message.properties.contentType as string,
          messageId: message.properties.messageId as string,
          headers: { ...headers, 'x-acemq-attempt': { '!': 'int', value: 2 } },
        })
        channel.ack(message)
        return
      }
      channel.ack(message)
      countdown.tick()
    }
    const { consumerTag } = await limitedConsumer(raw.channel, queue, 100, 1, handle)
    const ms = await countdown.done
    await raw.channel.cancel(consumerTag)
    return ms
  }
  try {
    await drain(p.warmupQueue, p.warmup)
    collectGarbage()
    return await measured(profile, () => drain(p.queue, p.count))
  } finally {
    await publishModel.close()
    await raw.model.close()
  }
}

// ---------------------------------------------------------------------------------------------
// Close latency

interface CloseParams {
  readonly queue: string
  readonly handlerMs: number
  /** Close once this many messages were handled (the prefetch buffer is full by then). */
  readonly after: number
}

interface CloseResult {
  readonly ms: number
  readonly handled: number
}

const CLOSE_VARIANTS = ['acemq-mq', 'acemq-consumer', 'acemq-mq-nagle', 'amqplib'] as const

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** `@acemq`, prefetch 100, a 10 ms handler; times `mq.close()` or `consumer.close()`. */
function closeWithAceMq(which: 'mq' | 'consumer', nagle = false): Worker {
  return async (params) => {
    const p = params as CloseParams
    const mq: AceMq = await openAceMq('close', { nagle })
    let handled = 0
    let reached!: () => void
    const enough = new Promise<void>((resolve) => (reached = resolve))
    const consumer: Consumer = await mq.consume(
      p.queue,
      ConsumerOptions.defaults().withPrefetch(100),
      async () => {
        await sleep(p.handlerMs)
        if (++handled === p.after) reached()
      },
    )
    await enough
    const started = performance.now()
    if (which === 'mq') await mq.close()
    else await consumer.close()
    const ms = performance.now() - started
    if (which === 'consumer') await mq.close()
    return { ms, handled } satisfies CloseResult
  }
}

/** Raw amqplib, the same consumer by hand; close = cancel, wait for the running handler, close channel and connection. */
const closeWithAmqplib: Worker = async (params) => {
  const p = params as CloseParams
  const raw = await openRaw('close')
  let handled = 0
  let reached!: () => void
  const enough = new Promise<void>((resolve) => (reached = resolve))
  const state: LimitedConsumerState = { running: new Set(), stopped: false }
  const { consumerTag } = await limitedConsumer(
    raw.channel,
    p.queue,
    100,
    1,
    async (channel, message) => {
      await sleep(p.handlerMs)
      channel.ack(message)
      if (++handled === p.after) reached()
    },
    state,
  )
  await enough
  const started = performance.now()
  state.stopped = true
  await raw.channel.cancel(consumerTag)
  await Promise.all(state.running)
  await raw.channel.close()
  await raw.model.close()
  const ms = performance.now() - started
  return { ms, handled } satisfies CloseResult
}

// ---------------------------------------------------------------------------------------------

async function measureHop(
  context: RunContext,
  variant: HopVariant,
  count: number,
  profile?: string,
): Promise<Measured> {
  const { admin } = context
  const warmup = Math.min(context.sizes.warmup, 500)
  return withWarmupAndMain(admin, `retry-${variant}`, warmup, count, (warmupQueue, queue) =>
    runInChild<Measured>({
      worker: `retry:${variant.startsWith('acemq') ? 'acemq' : 'amqplib'}`,
      params: {
        warmupQueue,
        warmup,
        queue,
        count,
        failOnce: variant.endsWith('retry'),
      } satisfies HopParams,
      ...(profile !== undefined && { profile }),
    }),
  )
}

async function hopSection(context: RunContext, profiles: ProfileResult[]): Promise<Section> {
  const { sizes, log } = context
  const count = sizes.retry
  const runs = await interleave({
    name: 'retry hop',
    variants: HOP_VARIANTS,
    rounds: sizes.rounds,
    unit: 'ms',
    log,
    measure: (variant) => measureHop(context, variant, count),
    recover: context.recover,
  })
  // Milliseconds per message.
  const wall = (variant: HopVariant): number[] => runs[variant].map((r) => r.ms / count)
  const cpu = (variant: HopVariant): number[] => runs[variant].map((r) => r.cpuMs / count)
  const minus = (a: number, b: number): number => a - b
  const acemqHop = perRound(wall('acemq-retry'), wall('acemq-ack'), minus)
  const rawHop = perRound(wall('amqplib-retry'), wall('amqplib-ack'), minus)
  const acemqHopCpu = perRound(cpu('acemq-retry'), cpu('acemq-ack'), minus)
  const rawHopCpu = perRound(cpu('amqplib-retry'), cpu('amqplib-ack'), minus)
  if (shouldProfile(context, true)) {
    profiles.push(
      await profileRun(
        context,
        'retry-acemq',
        `@acemq consumer retrying ${count} messages once`,
        count,
        (file) => measureHop(context, 'acemq-retry', count, file),
      ),
    )
  }
  return {
    title: 'Retry hop: one in-consumer retry republish',
    setup: [
      `${count.toLocaleString('en-US')} messages per run (after ${Math.min(sizes.warmup, 500)} to warm up), prefetch 100, one at a time (concurrency 1).`,
      '`ack`: the handler accepts every message. `retry`: the handler throws on attempt 1 and accepts attempt 2; `@acemq` with `RetryPolicy.fixed(2, 1)` waits 1 ms in the consumer, republishes the copy (attempt 2) to the queue, and acks the original once the copy is confirmed.',
      'amqplib does the same by hand: wait 1 ms, publish the copy with attempt 2 on a confirm channel of a second connection, ack the original on the confirm.',
      "Extra per hop = (retry time − ack time) ÷ messages, per round. Each hop includes the 1 ms wait and the broker's confirm of a persistent message.",
    ],
    rows: [
      row('@acemq, ack', 'ms/msg', wall('acemq-ack')),
      row('@acemq, retry once', 'ms/msg', wall('acemq-retry')),
      row('amqplib, ack', 'ms/msg', wall('amqplib-ack')),
      row('amqplib, retry once', 'ms/msg', wall('amqplib-retry')),
      row('@acemq: extra per hop', 'ms', acemqHop, true),
      row('amqplib: extra per hop', 'ms', rawHop, true),
      row('@acemq hop ÷ amqplib hop', '×', perRound(acemqHop, rawHop, div), true),
      row('@acemq: CPU per hop', 'ms', acemqHopCpu, true),
      row('amqplib: CPU per hop', 'ms', rawHopCpu, true),
    ],
    checks: [],
    notes: [],
  }
}

async function closeSection(context: RunContext): Promise<Section> {
  const { sizes, log, admin } = context
  const backlog = sizes.closeBacklog
  const handlerMs = 10
  const after = 20
  const lost: string[] = []
  const runs = await interleave({
    name: 'close',
    variants: CLOSE_VARIANTS,
    rounds: sizes.rounds,
    unit: 'ms',
    log,
    recover: context.recover,
    measure: (variant) =>
      withFilledQueue(admin, `close-${variant}`, backlog, async (queue) => {
        const result = await runInChild<CloseResult>({
          worker: `close:${variant}`,
          params: { queue: queue, handlerMs, after } satisfies CloseParams,
        })
        // Every message is either acked (handled) or back in the queue: nothing lost, nothing
        // doubled. A loaded broker may still be putting the last ones back: look for up to 5 s.
        let ready = await admin.depth(queue)
        for (let waited = 0; ready + result.handled !== backlog && waited < 5_000; waited += 100) {
          await sleep(100)
          ready = await admin.depth(queue)
        }
        if (ready + result.handled !== backlog) {
          lost.push(
            `${variant}: ${result.handled} handled + ${ready} back in the queue ≠ ${backlog}`,
          )
        }
        return result
      }),
  })
  return {
    title: 'Close latency with a backlog',
    setup: [
      `${backlog.toLocaleString('en-US')} messages queued, prefetch 100, concurrency 1, a ${handlerMs} ms handler; close is called once ${after} messages were handled (the prefetch buffer is full by then).`,
      "Timed from the call to `close()` to its promise resolving. `@acemq mq.close()`: the connection (drain, cancel, hand back the buffered deliveries, wait for the running handler, close channels and connections). `@acemq consumer.close()`: that consumer only. `@acemq … Nagle on`: `mq.close()` on a connection made with `connect(url, { socketOptions: { noDelay: false } })`, i.e. with Nagle's algorithm on as amqplib's own default has it — what the transport did before it defaulted to `noDelay` (BENCHMARKS.md, finding 1). amqplib: cancel, await the running handler, close the channel and the connection.",
      'Afterwards the parent checks that handled + messages back in the queue = backlog.',
    ],
    rows: [
      row(
        '@acemq mq.close()',
        'ms',
        runs['acemq-mq'].map((r) => r.ms),
      ),
      row(
        '@acemq consumer.close()',
        'ms',
        runs['acemq-consumer'].map((r) => r.ms),
      ),
      row(
        'amqplib (by hand)',
        'ms',
        runs.amqplib.map((r) => r.ms),
      ),
      row(
        '@acemq mq.close(), Nagle on (noDelay: false)',
        'ms',
        runs['acemq-mq-nagle'].map((r) => r.ms),
      ),
    ],
    checks: [],
    notes: [
      lost.length === 0
        ? `Every run accounted for all ${backlog.toLocaleString('en-US')} messages (handled + requeued), for every contestant.`
        : `Messages unaccounted for: ${lost.join('; ')}.`,
      `The design's bound (docs/design.md §8) is (longest running handler or 5 s) + a small margin; here the longest handler is ${handlerMs} ms.`,
    ],
  }
}

export const retry: Comparison = {
  id: 'retry',
  title: '4. Retry hops, close latency',
  workers: {
    'retry:acemq': hopWithAceMq,
    'retry:amqplib': hopWithAmqplib,
    'close:acemq-mq': closeWithAceMq('mq'),
    'close:acemq-consumer': closeWithAceMq('consumer'),
    'close:acemq-mq-nagle': closeWithAceMq('mq', true),
    'close:amqplib': closeWithAmqplib,
  },

  async run(context) {
    const profiles: ProfileResult[] = []
    const sections = [await hopSection(context, profiles), await closeSection(context)]
    return { id: 'retry', title: this.title, sections, profiles }
  },
}
