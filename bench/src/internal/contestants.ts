import amqplib, { type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib'
import { ConsumerOptions, type AceMq, type Handler } from '@acemq/core'
import { connect } from '@acemq/transport-amqp'
import { AMQP_URL } from './config.js'

/**
 * Counts handled messages and times them from the first delivery (the first {@link begin} or
 * {@link tick}) to the `count`-th tick. The clock stops on the next turn of the event loop after
 * the last one, so that the settlement the library or the raw code writes right after handling
 * (the ack) is included, the same for everyone.
 */
export class Countdown {
  readonly #count: number
  #seen = 0
  #first = 0
  readonly done: Promise<number>
  #resolve!: (ms: number) => void

  constructor(count: number) {
    this.#count = count
    this.done = new Promise<number>((resolve) => {
      this.#resolve = resolve
    })
  }

  get seen(): number {
    return this.#seen
  }

  /** A delivery arrived (one that may not count, e.g. a first attempt that fails): the clock starts. */
  begin(): void {
    if (this.#first === 0) this.#first = performance.now()
  }

  tick(): void {
    this.begin()
    if (++this.#seen === this.#count)
      setImmediate(() => this.#resolve(performance.now() - this.#first))
  }
}

// ---------------------------------------------------------------------------------------------
// @acemq

/**
 * An `@acemq` connection with the transport's defaults (Nagle off), or with Nagle's algorithm on
 * when `nagle` says so or `BENCH_ACEMQ_NAGLE=1`.
 */
export function openAceMq(
  name: string,
  options: { readonly nagle?: boolean; readonly url?: string } = {},
): Promise<AceMq> {
  const nagle = options.nagle ?? process.env['BENCH_ACEMQ_NAGLE'] === '1'
  return connect(options.url ?? AMQP_URL, {
    connectionName: `acemq-bench ${name}`,
    ...(nagle && { socketOptions: { noDelay: false } }),
    onError: (error, context) => console.error(`[bench] @acemq reported: ${context}:`, error),
  })
}

/** The handler a realistic consumer has: it awaits something (here a resolved promise) before returning. */
export function awaitingHandler(countdown: Countdown): Handler<unknown> {
  return async () => {
    await Promise.resolve()
    countdown.tick()
  }
}

/** Drains `count` messages from `queue` through an `@acemq` consumer. */
export async function drainAceMq(
  mq: AceMq,
  queue: string,
  count: number,
  options: ConsumerOptions = ConsumerOptions.defaults().withPrefetch(100),
  handler?: (countdown: Countdown) => Handler<unknown>,
): Promise<number> {
  const countdown = new Countdown(count)
  const consumer = await mq.consume<unknown>(
    queue,
    options,
    handler?.(countdown) ??
      (() => {
        countdown.tick()
      }),
  )
  const ms = await countdown.done
  await consumer.close()
  return ms
}

// ---------------------------------------------------------------------------------------------
// raw amqplib

export interface RawConnection {
  readonly model: ChannelModel
  readonly channel: Channel
}

export async function openRaw(name: string): Promise<RawConnection> {
  const model = await amqplib.connect(AMQP_URL, {
    clientProperties: { connection_name: `acemq-bench ${name}` },
  })
  const channel = await model.createChannel()
  return { model, channel }
}

/**
 * Drains `count` messages: per-consumer prefetch, `JSON.parse` of the body, ack; with `awaiting`,
 * in an async function that awaits a resolved promise before the ack, as {@link awaitingHandler}.
 */
export async function drainRaw(
  raw: RawConnection,
  queue: string,
  count: number,
  prefetch = 100,
  awaiting = false,
): Promise<number> {
  const { channel } = raw
  const countdown = new Countdown(count)
  await channel.prefetch(prefetch, false)
  const handle = (message: ConsumeMessage): void => {
    JSON.parse(message.content.toString('utf8'))
    channel.ack(message)
    countdown.tick()
  }
  const handleAwaiting = async (message: ConsumeMessage): Promise<void> => {
    await Promise.resolve()
    handle(message)
  }
  const { consumerTag } = await channel.consume(queue, (message: ConsumeMessage | null) => {
    if (message === null) return
    if (awaiting) void handleAwaiting(message)
    else handle(message)
  })
  const ms = await countdown.done
  await channel.cancel(consumerTag)
  return ms
}

/** What a {@link limitedConsumer} shares: the handlers running now, and a stop switch. */
export interface LimitedConsumerState {
  readonly running: Set<Promise<void>>
  /** Set when closing: no further delivery is started (the broker takes them back on close). */
  stopped: boolean
}

/**
 * A raw amqplib consumer that runs `handle` for at most `concurrency` deliveries at once, the
 * rest waiting in arrival order: by hand what `@acemq`'s `withConcurrency(n)` does.
 */
export async function limitedConsumer(
  channel: Channel,
  queue: string,
  prefetch: number,
  concurrency: number,
  handle: (channel: Channel, message: ConsumeMessage) => Promise<void>,
  state: LimitedConsumerState = { running: new Set(), stopped: false },
): Promise<{ consumerTag: string }> {
  const waiting: ConsumeMessage[] = []
  const pump = (): void => {
    while (!state.stopped && state.running.size < concurrency) {
      const next = waiting.shift()
      if (next === undefined) return
      const running: Promise<void> = handle(channel, next).then(() => {
        state.running.delete(running)
        pump()
      })
      state.running.add(running)
    }
  }
  await channel.prefetch(prefetch, false)
  return channel.consume(queue, (message) => {
    if (message === null) return
    waiting.push(message)
    pump()
  })
}
