// What the engine itself costs per message at concurrency 1, with no broker and no client: a
// bare transport hands over prepared deliveries — the ~300-byte JSON order with the seven
// x-acemq-* headers as amqplib decodes them — a window of 100 at a time (prefetch 100), the
// next window once all of them are settled. Either @acemq consumes them (concurrency 1, a
// handler that does nothing) or a hand-written callback does (JSON.parse, ack). The difference
// is the engine's own: envelope reading, decoding, the AsyncLocalStorage around the handler,
// the promises per message, the bookkeeping. Each variant runs in a fresh process,
// interleaved, and reports CPU (user + system) µs per message over the measured part.
// Run: pnpm --filter @acemq/bench exec tsx --conditions=@acemq/source src/experiments/engine-cost.ts
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { AceMq, ConsumerOptions } from '@acemq/core'
import type { Headers } from '@acemq/core'
import type { Delivery, Transport, TransportState, TransportSubscription } from '@acemq/core/spi'
import { QUICK } from '../internal/config.js'
import { acemqShapedMessage } from '../internal/messages.js'
import { fmt, median } from '../internal/stats.js'
import { runWhenMain, writeResult } from './experiment.js'

const VARIANTS = ['engine', 'by-hand'] as const
type Variant = (typeof VARIANTS)[number]
const COUNT = QUICK ? 20_000 : 200_000
const WARMUP = QUICK ? 5_000 : 50_000
const ROUNDS = QUICK ? 2 : 5
const WINDOW = 100

/** A delivery as the AMQP transport hands it over, settled into a counter. */
class BareDelivery implements Delivery {
  readonly exchange = ''
  readonly redelivered = false
  #settled = false
  constructor(
    readonly body: Uint8Array,
    readonly headers: Headers,
    readonly properties: Delivery['properties'],
    readonly routingKey: string,
    readonly window: { open: number },
  ) {}
  get settleable(): boolean {
    return !this.#settled
  }
  ack(): boolean {
    return this.#settle()
  }
  nack(): boolean {
    return this.#settle()
  }
  #settle(): boolean {
    if (this.#settled) return false
    this.#settled = true
    this.window.open--
    return true
  }
}

/** Only what consuming needs; deliveries come from {@link BareTransport.deliver}. */
class BareTransport implements Transport {
  readonly kind = 'bare'
  readonly description = 'bare (engine-cost experiment)'
  readonly state: TransportState = {
    open: true,
    closed: false,
    blocked: false,
    blockedReason: undefined,
  }
  onDelivery: ((delivery: Delivery) => void) | undefined
  async connect(): Promise<void> {}
  async declare(): Promise<void> {}
  async publish(): Promise<void> {
    throw new Error('the bare transport does not publish')
  }
  async consume(
    _queue: string,
    _options: unknown,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    this.onDelivery = onDelivery
    return {
      cancel: async () => {
        this.onDelivery = undefined
      },
      close: async () => {
        this.onDelivery = undefined
      },
    }
  }
  onEvent(): () => void {
    return () => undefined
  }
  async close(): Promise<void> {}
}

/** The messages, prepared once: headers as amqplib decodes them (integers as numbers). */
function messages(count: number): { body: Buffer; headers: Headers; messageId: string }[] {
  return Array.from({ length: count }, (_, i) => {
    const { content, options } = acemqShapedMessage(i, 'engine-cost')
    const headers: Headers = {}
    for (const [key, value] of Object.entries(options.headers as Record<string, unknown>)) {
      headers[key] =
        typeof value === 'object' && value !== null && 'value' in value ? value.value : value
    }
    return { body: content, headers, messageId: options.messageId as string }
  })
}

/** Hands `count` deliveries to `onDelivery`, a window at a time; resolves when all are settled. */
async function drive(transport: BareTransport, count: number): Promise<void> {
  const prepared = messages(WINDOW)
  const window = { open: 0 }
  for (let sent = 0; sent < count; sent += WINDOW) {
    for (const m of prepared) {
      window.open++
      transport.onDelivery?.(
        new BareDelivery(
          m.body,
          m.headers,
          { contentType: 'application/json', messageId: m.messageId },
          'engine-cost',
          window,
        ),
      )
    }
    while (window.open > 0) await new Promise((resolve) => setImmediate(resolve))
  }
}

/** One measurement, in this (fresh) process: CPU µs per message. */
async function child(variant: Variant): Promise<void> {
  const transport = new BareTransport()
  const mq = await AceMq.connect(transport)
  if (variant === 'engine') {
    await mq.consume('engine-cost', ConsumerOptions.defaults().withPrefetch(WINDOW), () => {})
  } else {
    await transport.consume('engine-cost', { prefetch: WINDOW }, (delivery) => {
      JSON.parse(Buffer.from(delivery.body).toString('utf8'))
      delivery.ack()
    })
  }
  await drive(transport, WARMUP)
  globalThis.gc?.()
  const before = process.cpuUsage()
  await drive(transport, COUNT)
  const used = process.cpuUsage(before)
  await mq.close()
  console.log(JSON.stringify({ usPerMessage: (used.user + used.system) / COUNT }))
}

async function main(): Promise<void> {
  const variant = process.argv[2] as Variant | undefined
  if (variant !== undefined) return child(variant)
  const cpu: Record<Variant, number[]> = { engine: [], 'by-hand': [] }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
    for (const v of order) {
      const run = spawnSync(
        process.execPath,
        [...process.execArgv, '--expose-gc', fileURLToPath(import.meta.url), v],
        { encoding: 'utf8' },
      )
      if (run.status !== 0) throw new Error(`${v} failed: ${run.stderr}`)
      const { usPerMessage } = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
        usPerMessage: number
      }
      cpu[v].push(usPerMessage)
      console.log(`round ${round + 1}: ${v} ${fmt(usPerMessage)} µs/message`)
    }
  }
  const engine = median(cpu.engine)
  const byHand = median(cpu['by-hand'])
  console.log(
    `median: engine ${fmt(engine)}, by hand ${fmt(byHand)}, the engine's own ${fmt(engine - byHand)} µs/message`,
  )
  writeResult('engine-cost', { count: COUNT, rounds: ROUNDS, cpuUsPerMessage: cpu })
}

runWhenMain(import.meta.url, main)
