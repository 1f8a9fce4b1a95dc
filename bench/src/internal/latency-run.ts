import { setTimeout as sleep } from 'node:timers/promises'
import { randomUUID } from 'node:crypto'
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

export interface LatencyParams {
  readonly side: 'acemq' | 'amqplib'
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

/** Records latencies of the messages after the warm-up, and says when the last has come. */
class Recorder {
  readonly histogram = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
  })
  received = 0
  readonly #from: number
  readonly #total: number
  #last: () => void = () => undefined
  readonly all = new Promise<void>((resolve) => (this.#last = resolve))

  constructor(from: number, total: number) {
    this.#from = from
    this.#total = total
  }

  record(stamped: Stamped): void {
    // µs, at least 1: the histogram's unit.
    if (stamped.seq >= this.#from)
      this.histogram.recordValue(Math.max(1, Math.round((performance.now() - stamped.due) * 1000)))
    if (++this.received === this.#total) this.#last()
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
    await work(id)
    recorder.record(body)
  })
  try {
    let cpuAtWarm: NodeJS.CpuUsage | undefined
    let brokerAtWarm: number | undefined
    let machineAtWarm: ReturnType<typeof machineCpuMs>
    let warmAt = 0
    const ms = await offer(p.rate, total, (seq, due) => {
      if (seq === warm) {
        cpuAtWarm = process.cpuUsage()
        brokerAtWarm = brokerCpu()
        machineAtWarm = machineCpuMs()
        warmAt = performance.now()
      }
      contestant.publish({ ...order(seq), due, seq })
    })
    const publishedRate = ((total - warm) * 1000) / (performance.now() - warmAt || ms)
    await Promise.race([recorder.all, sleep(p.drainMs)])
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

/** `@acemq`: `publisher.send()` (not awaited: the offered rate does not wait for confirms) and a consumer. */
export function aceMqSide(p: LatencyParams, options: ConsumerOptions) {
  return async (handle: (body: Stamped, id: string) => Promise<void>): Promise<Side> => {
    const mq: AceMq = await openAceMq('latency')
    const publisher = mq.publisher<Stamped>('', p.queue)
    await mq.consume<Stamped>(
      p.queue,
      options.withPrefetch(p.prefetch).withConcurrency(p.concurrency),
      (message) => handle(message.payload, message.envelope.id),
    )
    return {
      publish: (body) => void publisher.send(body).catch(fail),
      close: () => mq.close(),
    }
  }
}

/**
 * Raw amqplib, Nagle off (`noDelay: true`) on both connections: a confirm channel publishing the
 * same bytes `@acemq` sends (envelope headers written out), and a consumer acking each message
 * after the handler — at most `concurrency` handlers at once when it is below the prefetch.
 */
export function rawSide(p: LatencyParams) {
  return async (handle: (body: Stamped, id: string) => Promise<void>): Promise<Side> => {
    const options = { noDelay: true, clientProperties: { connection_name: 'acemq-bench latency' } }
    const publishing = await amqplib.connect(AMQP_URL, options)
    const consuming = await amqplib.connect(AMQP_URL, options)
    const out = await publishing.createConfirmChannel()
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
      close: async () => {
        await consuming.close()
        await publishing.close()
      },
    }
  }
}
