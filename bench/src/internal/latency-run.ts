import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import amqplib, { type ConsumeMessage } from 'amqplib'
import * as hdr from 'hdr-histogram-js'
import { ConsumerOptions, type AceMq } from '@acemq/core'
import { AMQP_URL } from './config.js'
import { limitedConsumer, openAceMq } from './contestants.js'
import { envelopeHeaders, order, type OrderPlaced } from './messages.js'
import { machineCores, machineCpuMs } from './proc-cpu.js'
import { brokerCpu } from './profiler.js'

// The child side of the latency comparison (issue 32): one process publishes at a fixed offered
// rate and consumes the same queue, as an application that does both would; every message
// carries the time it was due, and the consumer records (now − due) in an HDR histogram.

/** What a latency run's handler does besides recording. */
export type HandlerKind = 'async' | 'io' | 'pg'

/** A handler's work, given the message id: await a resolved promise, a 1 ms timer, or the store. */
export type Work = (id: string) => Promise<void>

/** Whose publisher or consumer a run uses. */
export type SideName = 'acemq' | 'amqplib'

export interface LatencyParams {
  readonly side: SideName
  /**
   * The publisher's side when it is not `side`'s: a split run (`acemq` publishing to an amqplib
   * consumer, or the other way round) tells which half a latency gap comes from.
   */
  readonly publisher?: SideName
  readonly handler: HandlerKind
  readonly rate: number
  /** Seconds offered before recording starts (not recorded), then seconds recorded. */
  readonly warmupSeconds: number
  readonly seconds: number
  readonly queue: string
  readonly prefetch: number
  readonly concurrency: number
  /** How long to wait for the last messages after the last is offered, ms. */
  readonly drainMs: number
}

export interface LatencyResult {
  /** Percentiles of the recorded stretch, ms. */
  readonly p50: number
  readonly p99: number
  readonly p999: number
  readonly max: number
  readonly offered: number
  readonly received: number
  /** Messages per second actually published over the recorded stretch. */
  readonly publishedRate: number
  /** CPU of this process per recorded message, µs. */
  readonly cpuUsPerMessage: number
  /** Cores the broker kept busy over the recorded stretch (CPU time ÷ wall time); NaN unread. */
  readonly brokerCores: number
  /** Cores this process kept busy over the same stretch. */
  readonly processCores: number
  /** Cores the whole machine kept busy (every process, ours and others'); NaN unread. */
  readonly machineCores: number
  /** Where the wait went, over the recorded stretch (ms): see {@link Recorder}. */
  readonly stages: Stages
}

/** A run's wait split into stages, and what held this process's event loop up (ms). */
export interface Stages {
  /** The publisher's lag (published − due), p99. */
  readonly lagP99: number
  /** Published → handler started: the publish path, the broker, the consume path. */
  readonly transitP50: number
  readonly transitP99: number
  /** Handler started → recorded (the handler's own await). */
  readonly handlerP99: number
  /** Node's event-loop delay (`monitorEventLoopDelay`, 1 ms resolution), p99 and max. */
  readonly loopDelayP99: number
  readonly loopDelayMax: number
  /** Garbage collections: how many, their pauses in all and the longest. */
  readonly gcCount: number
  readonly gcMs: number
  readonly gcMaxMs: number
  /** Of which in collections other than the minor one (mark-compact, incremental marking, …). */
  readonly gcMajorMs: number
}

/** A stamped message: the order and when it was due to be published (`performance.now()`, ms). */
type Stamped = OrderPlaced & { readonly due: number; readonly seq: number }

/**
 * Offers `total` messages at `rate` per second: on every timer turn (about 1 ms) it publishes
 * every message whose time has come, each stamped with the time it was due — so a publisher
 * that falls behind shows in the latency instead of hiding it (coordinated omission).
 */
function offer(
  rate: number,
  total: number,
  publish: (seq: number, due: number) => void,
): Promise<number> {
  const t0 = performance.now()
  let seq = 0
  return new Promise<number>((resolve) => {
    const tick = (): void => {
      const now = performance.now()
      const due = Math.min(total, Math.floor(((now - t0) * rate) / 1000) + 1)
      while (seq < due) {
        publish(seq, t0 + (seq * 1000) / rate)
        seq++
      }
      if (seq >= total) resolve(performance.now() - t0)
      else setTimeout(tick, 1)
    }
    tick()
  })
}

/** An HDR histogram in µs (values from 1 µs to an hour, 3 significant digits). */
const histogram = (): hdr.Histogram =>
  hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
  })

/** Records `ms` (at least 1 µs: the histogram's unit). */
const recordMs = (h: hdr.Histogram, ms: number): void =>
  h.recordValue(Math.max(1, Math.round(ms * 1000)))

/**
 * Records latencies of the messages after the warm-up, and says when the last has come. Beside
 * the whole wait (received − due) it splits each message's into three stages, the publisher and
 * consumer being one process: the publisher's lag (published − due: the timer turn came late,
 * the event loop was busy), transit (handler started − published: the publish path, the broker
 * and the consume path) and the handler (recorded − handler started).
 */
class Recorder {
  readonly histogram = histogram()
  readonly lag = histogram()
  readonly transit = histogram()
  readonly handler = histogram()
  received = 0
  readonly #from: number
  readonly #total: number
  readonly #publishedAt: Float64Array
  readonly #startedAt: Float64Array
  #last: () => void = () => undefined
  readonly all = new Promise<void>((resolve) => (this.#last = resolve))

  constructor(from: number, total: number) {
    this.#from = from
    this.#total = total
    this.#publishedAt = new Float64Array(total)
    this.#startedAt = new Float64Array(total)
  }

  published(seq: number): void {
    this.#publishedAt[seq] = performance.now()
  }

  started(stamped: Stamped): void {
    this.#startedAt[stamped.seq] = performance.now()
  }

  record(stamped: Stamped): void {
    const seq = stamped.seq
    if (seq >= this.#from) {
      const now = performance.now()
      const published = this.#publishedAt[seq] as number
      const started = this.#startedAt[seq] as number
      recordMs(this.histogram, now - stamped.due)
      recordMs(this.lag, published - stamped.due)
      recordMs(this.transit, started - published)
      recordMs(this.handler, now - started)
    }
    if (++this.received === this.#total) this.#last()
  }
}

/** The process's garbage collections over a stretch: count, total and longest pause, ms. */
function watchGc(): {
  stop(): { count: number; totalMs: number; maxMs: number; majorMs: number }
} {
  let count = 0
  let totalMs = 0
  let maxMs = 0
  let majorMs = 0
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      count += 1
      totalMs += entry.duration
      maxMs = Math.max(maxMs, entry.duration)
      const kind = (entry as { detail?: { kind?: number } }).detail?.kind
      if (kind !== constants.NODE_PERFORMANCE_GC_MINOR) majorMs += entry.duration
    }
  })
  observer.observe({ entryTypes: ['gc'] })
  return {
    stop: () => {
      observer.disconnect()
      return { count, totalMs, maxMs, majorMs }
    },
  }
}

/** Runs one latency measurement with the given side's publisher and consumer. */
export async function latencyRun(
  p: LatencyParams,
  work: Work,
  side: (handle: (body: Stamped, id: string) => Promise<void>) => Promise<Side>,
): Promise<LatencyResult> {
  const warm = Math.round(p.warmupSeconds * p.rate)
  const total = warm + Math.round(p.seconds * p.rate)
  const recorder = new Recorder(warm, total)
  const contestant = await side(async (body, id) => {
    recorder.started(body)
    await work(id)
    recorder.record(body)
  })
  try {
    let cpuAtWarm: NodeJS.CpuUsage | undefined
    let brokerAtWarm: number | undefined
    let machineAtWarm: ReturnType<typeof machineCpuMs>
    let warmAt = 0
    let gc: ReturnType<typeof watchGc> | undefined
    const loop = monitorEventLoopDelay({ resolution: 1 })
    const ms = await offer(p.rate, total, (seq, due) => {
      if (seq === warm) {
        cpuAtWarm = process.cpuUsage()
        brokerAtWarm = brokerCpu()
        machineAtWarm = machineCpuMs()
        warmAt = performance.now()
        gc = watchGc()
        loop.enable()
      }
      recorder.published(seq)
      contestant.publish({ ...order(seq), due, seq })
    })
    const publishedRate = ((total - warm) * 1000) / (performance.now() - warmAt || ms)
    await Promise.race([recorder.all, sleep(p.drainMs)])
    loop.disable()
    const collections = gc?.stop() ?? { count: 0, totalMs: 0, maxMs: 0, majorMs: 0 }
    const cpu = process.cpuUsage(cpuAtWarm)
    const brokerNow = brokerCpu()
    const machineNow = machineCpuMs()
    const wallMs = performance.now() - warmAt
    const h = recorder.histogram
    const at = (q: number): number => h.getValueAtPercentile(q) / 1000
    // Messages never received within the drain time count as having waited at least that long.
    const missing = total - recorder.received
    if (missing > 0)
      h.recordValueWithCount(Math.round((p.drainMs + p.seconds * 1000) * 1000), missing)
    return {
      p50: at(50),
      p99: at(99),
      p999: at(99.9),
      max: h.maxValue / 1000,
      offered: total - warm,
      received: recorder.received - Math.min(recorder.received, warm),
      publishedRate,
      cpuUsPerMessage: (cpu.user + cpu.system) / (total - warm),
      brokerCores:
        brokerAtWarm === undefined || brokerNow === undefined
          ? Number.NaN
          : (brokerNow - brokerAtWarm) / wallMs,
      processCores: (cpu.user + cpu.system) / 1000 / wallMs,
      stages: {
        lagP99: recorder.lag.getValueAtPercentile(99) / 1000,
        transitP50: recorder.transit.getValueAtPercentile(50) / 1000,
        transitP99: recorder.transit.getValueAtPercentile(99) / 1000,
        handlerP99: recorder.handler.getValueAtPercentile(99) / 1000,
        loopDelayP99: loop.percentile(99) / 1e6,
        loopDelayMax: loop.max / 1e6,
        gcCount: collections.count,
        gcMs: collections.totalMs,
        gcMaxMs: collections.maxMs,
        gcMajorMs: collections.majorMs,
      },
      machineCores: machineCores(machineAtWarm, machineNow, wallMs),
    }
  } finally {
    closing = true
    await contestant.close()
  }
}

/** A contestant's publisher and consumer, running. */
export interface Side {
  publish(body: Stamped): void
  close(): Promise<void>
}

/** Set when the run is over: confirms still outstanding then fail with the channel, harmlessly. */
let closing = false

const fail = (error: unknown): void => {
  if (closing) return
  console.error('[bench] latency publish failed:', error)
  process.exitCode = 1
}

/** A running publisher of stamped messages. */
export interface Publishing {
  publish(body: Stamped): void
  close(): Promise<void>
}

/** A running consumer, handing each message to the run's handler. */
export interface Consuming {
  close(): Promise<void>
}

type Handle = (body: Stamped, id: string) => Promise<void>

/**
 * The run's publisher and consumer: both `side`'s, or — when `p.publisher` names the other
 * side — a split run. `@acemq`'s two halves share one `AceMq` (one application doing both), as
 * raw amqplib's share one process with two connections.
 */
export function sides(p: LatencyParams, options: ConsumerOptions) {
  const publisherSide = p.publisher ?? p.side
  return async (handle: Handle): Promise<Side> => {
    const mq =
      p.side === 'acemq' || publisherSide === 'acemq' ? await openAceMq('latency') : undefined
    let consuming: Consuming | undefined
    try {
      consuming =
        p.side === 'acemq'
          ? await aceMqConsumer(mq as AceMq, p, options, handle)
          : await rawConsumer(p, handle)
      const publishing =
        publisherSide === 'acemq' ? aceMqPublisher(mq as AceMq, p) : await rawPublisher(p)
      const consumer = consuming
      return {
        publish: (body) => publishing.publish(body),
        close: async () => {
          await consumer.close()
          await publishing.close()
          await mq?.close()
        },
      }
    } catch (error) {
      await consuming?.close()
      await mq?.close()
      throw error
    }
  }
}

/** `@acemq`: `publisher.send()` (not awaited: the offered rate does not wait for confirms). */
function aceMqPublisher(mq: AceMq, p: LatencyParams): Publishing {
  const publisher = mq.publisher<Stamped>('', p.queue)
  return {
    publish: (body) => void publisher.send(body).catch(fail),
    close: () => Promise.resolve(),
  }
}

/** `@acemq`: `mq.consume` with the run's prefetch and concurrency. */
async function aceMqConsumer(
  mq: AceMq,
  p: LatencyParams,
  options: ConsumerOptions,
  handle: Handle,
): Promise<Consuming> {
  await mq.consume<Stamped>(
    p.queue,
    options.withPrefetch(p.prefetch).withConcurrency(p.concurrency),
    (message) => handle(message.payload, message.envelope.id),
  )
  return { close: () => Promise.resolve() }
}

const RAW_OPTIONS = { noDelay: true, clientProperties: { connection_name: 'acemq-bench latency' } }

/**
 * Raw amqplib, Nagle off (`noDelay: true`): a consumer acking each message after the handler —
 * at most `concurrency` handlers at once when it is below the prefetch.
 */
async function rawConsumer(p: LatencyParams, handle: Handle): Promise<Consuming> {
  const consuming = await amqplib.connect(AMQP_URL, RAW_OPTIONS)
  const channel = await consuming.createChannel()
  const onMessage = async (ch: typeof channel, message: ConsumeMessage): Promise<void> => {
    try {
      const body = JSON.parse(message.content.toString('utf8')) as Stamped
      await handle(body, String(message.properties.messageId))
      ch.ack(message)
    } catch (error) {
      // Handlers still running when the run closes the connection cannot ack: harmless then.
      fail(error)
    }
  }
  if (p.concurrency < p.prefetch) {
    await limitedConsumer(channel, p.queue, p.prefetch, p.concurrency, onMessage)
  } else {
    await channel.prefetch(p.prefetch, false)
    await channel.consume(p.queue, (message) => {
      if (message !== null) void onMessage(channel, message)
    })
  }
  return { close: () => consuming.close() }
}

/**
 * Raw amqplib, Nagle off: a confirm channel publishing the same bytes `@acemq` sends (envelope
 * headers written out).
 */
async function rawPublisher(p: LatencyParams): Promise<Publishing> {
  const publishing = await amqplib.connect(AMQP_URL, RAW_OPTIONS)
  const out = await publishing.createConfirmChannel()
  return {
    publish: (body) => {
      const id = randomUUID()
      out.publish(
        '',
        p.queue,
        Buffer.from(JSON.stringify(body)),
        {
          persistent: true,
          mandatory: true,
          contentType: 'application/json',
          messageId: id,
          headers: envelopeHeaders(id, p.queue),
        },
        (error: unknown) => {
          if (error !== null && error !== undefined) fail(error)
        },
      )
    },
    close: () => publishing.close(),
  }
}
