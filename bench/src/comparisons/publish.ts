import { randomUUID } from 'node:crypto'
import amqplib, { type ConfirmChannel } from 'amqplib'
import { confirmPublish, windowed } from '../internal/broker.js'
import { runInChild } from '../internal/child.js'
import { AMQP_URL } from '../internal/config.js'
import { openAceMq } from '../internal/contestants.js'
import { envelopeHeaders, order, type OrderPlaced } from '../internal/messages.js'
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

interface PublishParams {
  readonly warmupQueue: string
  readonly warmup: number
  readonly queue: string
  readonly count: number
  readonly window: number
}

const VARIANTS = ['acemq', 'amqplib', 'amqplib-bare', 'rascal'] as const
type Variant = (typeof VARIANTS)[number]

/** Times `count` publishes with at most `window` awaiting their confirm. */
async function timed(
  count: number,
  window: number,
  send: (i: number) => Promise<unknown>,
): Promise<number> {
  const started = performance.now()
  await windowed(count, window, send)
  return performance.now() - started
}

/** Warms up on one queue, then times the measured one; `sender` makes the send for a queue. */
async function warmThenMeasure(
  p: PublishParams,
  profile: string | undefined,
  sender: (queue: string) => (i: number) => Promise<unknown>,
): Promise<Measured> {
  await timed(p.warmup, p.window, sender(p.warmupQueue))
  collectGarbage()
  return measured(profile, () => timed(p.count, p.window, sender(p.queue)))
}

/** `@acemq`: `mq.publisher('', queue).send(order)`, which resolves on the broker's confirm. */
const publishWithAceMq: Worker = async (params, { profile }) => {
  const p = params as PublishParams
  const mq = await openAceMq('publish')
  try {
    return await warmThenMeasure(p, profile, (queue) => {
      const publisher = mq.publisher<OrderPlaced>('', queue)
      return (i) => publisher.send(order(i))
    })
  } finally {
    await mq.close()
  }
}

/**
 * Raw amqplib on a confirm channel. `envelope` true: the same message on the wire as `@acemq`
 * sends (JSON, persistent, mandatory, message id, the `x-acemq-*` headers written literally);
 * false: what a bare amqplib user would send (no headers).
 */
function publishWithAmqplib(envelope: boolean): Worker {
  return async (params, { profile }) => {
    const p = params as PublishParams
    const model = await amqplib.connect(AMQP_URL, {
      clientProperties: { connection_name: 'acemq-bench publish' },
    })
    try {
      const channel: ConfirmChannel = await model.createConfirmChannel()
      return await warmThenMeasure(p, profile, (queue) => (i) => {
        const id = randomUUID()
        return confirmPublish(channel, '', queue, Buffer.from(JSON.stringify(order(i))), {
          persistent: true,
          mandatory: true,
          contentType: 'application/json',
          messageId: id,
          ...(envelope && { headers: envelopeHeaders(id, queue) }),
        })
      })
    } finally {
      await model.close()
    }
  }
}

/** rascal: a publication per queue (confirm, persistent, mandatory: rascal's defaults). */
const publishWithRascal: Worker = async (params, { profile }) => {
  const p = params as PublishParams
  const { openRascal } = await import('../internal/rascal-contestant.js')
  const broker = await openRascal([p.warmupQueue, p.queue])
  try {
    return await warmThenMeasure(p, profile, (queue) => async (i) => {
      const id = randomUUID()
      const publication = await broker.publish(`publish:${queue}`, order(i), {
        options: { messageId: id, headers: envelopeHeaders(id, queue) },
      })
      await new Promise<void>((resolve, reject) => {
        publication.on('success', () => resolve())
        publication.on('error', (error: unknown) =>
          reject(error instanceof Error ? error : new Error(String(error))),
        )
      })
    })
  } finally {
    await broker.shutdown()
  }
}

const WORKERS: Record<Variant, Worker> = {
  acemq: publishWithAceMq,
  amqplib: publishWithAmqplib(true),
  'amqplib-bare': publishWithAmqplib(false),
  rascal: publishWithRascal,
}

async function measure(
  context: RunContext,
  variant: Variant,
  count: number,
  profile?: string,
): Promise<Measured> {
  const { admin, sizes } = context
  const warmupQueue = await admin.queue(`publish-${variant}-warm`)
  const queue = await admin.queue(`publish-${variant}-main`)
  try {
    const run = await runInChild<Measured>({
      worker: `publish:${variant}`,
      params: {
        warmupQueue,
        warmup: Math.min(sizes.warmup, count),
        queue,
        count,
        window: sizes.publishWindow,
      } satisfies PublishParams,
      ...(profile !== undefined && { profile }),
    })
    const arrived = await admin.depth(queue)
    if (arrived !== count)
      throw new Error(`publish:${variant}: ${arrived} of ${count} messages arrived`)
    return run
  } finally {
    await admin.remove(warmupQueue, queue)
  }
}

export const publish: Comparison = {
  id: 'publish',
  title: '2. Publish with confirms, windowed',
  workers: Object.fromEntries(VARIANTS.map((v) => [`publish:${v}`, WORKERS[v]])),

  async run(context) {
    const { sizes, log } = context
    const count = sizes.publish
    // rascal keeps at most 5 publishes outstanding (see the note), so it gets fewer messages
    // to keep the run short; a rate is a rate.
    const countOf = (variant: Variant): number =>
      variant === 'rascal' ? sizes.publishRascal : count
    const runs = await interleave({
      name: 'publish',
      variants: VARIANTS,
      rounds: sizes.rounds,
      unit: 'ms',
      log,
      measure: (variant) => measure(context, variant, countOf(variant)),
      recover: context.recover,
    })
    const perSecond = {
      acemq: rates(runs.acemq, count),
      amqplib: rates(runs.amqplib, count),
      bare: rates(runs['amqplib-bare'], count),
      rascal: rates(runs.rascal, sizes.publishRascal),
    }
    const cpu = {
      acemq: cpuPerMessage(runs.acemq, count),
      amqplib: cpuPerMessage(runs.amqplib, count),
      bare: cpuPerMessage(runs['amqplib-bare'], count),
      rascal: cpuPerMessage(runs.rascal, sizes.publishRascal),
    }
    const target = check(
      '@acemq publisher throughput vs raw amqplib (same message on the wire, same window)',
      '@acemq msgs/s ÷ amqplib msgs/s, per round',
      perRound(perSecond.acemq, perSecond.amqplib, div),
      '>=',
      1.0,
    )
    // Issue 21: at least raw amqplib's throughput, and at most 1.2 × its CPU per message.
    const cpuTarget = check(
      '@acemq publisher CPU per message vs raw amqplib (same message on the wire, same window)',
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
          'publish-acemq',
          `@acemq publisher sending ${sizes.profile} messages`,
          sizes.profile,
          (file) => measure(context, 'acemq', sizes.profile, file),
        ),
        await profileRun(
          context,
          'publish-amqplib',
          `raw amqplib confirm channel sending ${sizes.profile} messages, same message (the reference)`,
          sizes.profile,
          (file) => measure(context, 'amqplib', sizes.profile, file),
        ),
      )
    }
    return {
      id: 'publish',
      title: this.title,
      sections: [
        {
          title: 'Throughput',
          setup: [
            `Each contestant publishes ${count.toLocaleString('en-US')} messages (after ${sizes.warmup.toLocaleString('en-US')} to a warm-up queue in the same process) through the default exchange to its own durable classic queue, at most ${sizes.publishWindow} awaiting their confirm at any time (a sliding window: a new send starts as soon as one is confirmed).`,
            `Timed from the first send to the last confirm; the parent then checks that every message arrived. rascal publishes ${sizes.publishRascal.toLocaleString('en-US')} messages (it is slow, see below). CPU: the publishing process's user + system time per message.`,
            "`@acemq`: `mq.publisher('', queue).send(order)` (envelope, JSON codec, persistent, mandatory, confirm). amqplib: `createConfirmChannel()`, `publish(…, callback)` with the same message on the wire (JSON, persistent, mandatory, message id, the `x-acemq-*` headers written literally). amqplib bare: the same without headers. rascal: a publication per queue with rascal's defaults (confirm, persistent, mandatory), the same headers, resolved on `success`.",
          ],
          rows: [
            row('@acemq', 'msgs/s', perSecond.acemq),
            row('amqplib (raw, same message)', 'msgs/s', perSecond.amqplib),
            row('amqplib (raw, no headers)', 'msgs/s', perSecond.bare),
            row('rascal', 'msgs/s', perSecond.rascal),
            row('rascal ÷ amqplib', '×', perRound(perSecond.rascal, perSecond.amqplib, div), true),
            row('@acemq CPU', 'µs/msg', cpu.acemq),
            row('amqplib CPU (same message)', 'µs/msg', cpu.amqplib),
            row('amqplib CPU (no headers)', 'µs/msg', cpu.bare),
            row('rascal CPU', 'µs/msg', cpu.rascal),
            row('@acemq CPU ÷ amqplib CPU', '×', perRound(cpu.acemq, cpu.amqplib, div), true),
          ],
          checks: [target, cpuTarget],
          notes: [
            'rascal publishes each message on a channel borrowed from its confirm-channel pool (at most 5) and keeps the channel until that message is confirmed, so at most 5 are outstanding whatever the window: its number is its design, not a fault of the harness.',
          ],
        },
      ],
      profiles,
    }
  },
}
