import { Ack, type AckResult } from '../consumer/ack.js'
import type { Consumer } from '../consumer/consumer.js'
import { ConsumerOptions } from '../consumer/consumer-options.js'
import type { HandlerContext, Message } from '../consumer/message.js'
import { toMillis, type Duration } from '../duration.js'
import { writeEnvelope } from '../envelope/envelope.js'
import { headerInteger, headerString } from '../headers/header-values.js'
import { ConfigurationError, FatalError, describeError } from '../errors.js'
import type { HealthReport } from '../health/health.js'
import { assertName, encodeMessage, type MessagingHost } from '../publisher/messaging-host.js'
import { sleep } from '../internal/timers.js'
import type { ScheduleEventInfo } from '../telemetry/instrumentation.js'
import type { Headers, OutgoingMessage } from '../transport/transport.js'
import {
  SCHEDULE_DUE_QUEUE,
  SCHEDULE_EXCHANGE,
  SCHEDULE_HEADERS,
  SCHEDULE_RETRY_MS,
  rungFor,
  scheduleDeclarations,
} from './schedule-ladder.js'
import type { SendOptions } from '../publisher/publisher.js'

/** The content type a message travels the ladder with: its own is in `x-schedule-content-type`. */
const LADDER_CONTENT_TYPE = 'application/octet-stream'

/** How many due messages one control consumer holds at once, by default. */
export const DEFAULT_SCHEDULE_PREFETCH = 50

/** What a scheduled send may set: envelope fields, application headers, the content type. */
export interface ScheduleOptions extends Omit<SendOptions, 'delay'> {
  /** The content type to encode with (default `application/json`). */
  readonly contentType?: string
}

/** Options for {@link Scheduler.startDelivering}. */
export interface DeliverOptions {
  /** Due messages held, and handled, at once (default 50). */
  readonly prefetch?: number
}

/** Headers the broker adds while a message rides the ladder: never passed on. */
const DEAD_LETTER_HEADERS = new Set([
  'x-death',
  'x-first-death-exchange',
  'x-first-death-queue',
  'x-first-death-reason',
  'x-last-death-exchange',
  'x-last-death-queue',
  'x-last-death-reason',
])

/**
 * Delayed delivery on the family's TTL ladder (docs/design.md §25): a message waits in
 * `acemq.schedule.{1h,10m,1m,10s,1s}` hop by hop until it is due, then the control consumer
 * (`startDelivering()`, in as many processes as you like) publishes it, confirmed and
 * mandatory, to its destination. Any delay, no plugin, no queue per delay.
 *
 * @example
 * ```ts
 * const scheduler = mq.scheduler()
 * await scheduler.startDelivering()
 * await scheduler.in('10m', '', 'invoices.remind', { invoice: 'i-1' })
 * await scheduler.at(new Date('2027-01-01T09:00:00Z'), 'billing', 'renew', { account: 'a-7' })
 * ```
 */
export class Scheduler {
  readonly #host: MessagingHost
  /** Aborted by close() and when the connection starts closing: ends every wait and retry. */
  #stopping = new AbortController()
  #declared: Promise<void> | undefined
  readonly #consumers: Consumer[] = []
  #scheduled = 0
  #delivered = 0
  #failures = 0
  /** Due messages whose destination does not route now, being tried again every 5 s. */
  #retrying = 0
  #lastFailure: string | undefined
  #unregisterHealth: (() => void) | undefined

  /** Created by `mq.scheduler()`. @internal */
  constructor(host: MessagingHost) {
    this.#host = host
  }

  /** Messages this scheduler put on the ladder. */
  get scheduled(): number {
    return this.#scheduled
  }
  /** Due messages its control consumers delivered (confirmed at their destination). */
  get delivered(): number {
    return this.#delivered
  }
  /** Deliveries that failed (unroutable, refused) and were tried again. */
  get failures(): number {
    return this.#failures
  }
  /** Due messages being tried again now. */
  get retrying(): number {
    return this.#retrying
  }

  /**
   * Schedules `payload` for `exchange`/`routingKey` after `delay` (0 or more). Resolves once
   * the broker has it on the ladder.
   *
   * @example
   * ```ts
   * await mq.scheduler().in('90d', '', 'subscriptions.expire', { account: 'a-7' })
   * ```
   */
  async in<T>(
    delay: Duration,
    exchange: string,
    routingKey: string,
    payload: T,
    options: ScheduleOptions = {},
  ): Promise<void> {
    const delayMs = toMillis(delay, 'in(delay)')
    await this.#schedule(Date.now() + delayMs, exchange, routingKey, payload, options, 'in')
  }

  /**
   * Schedules `payload` for `exchange`/`routingKey` at `date` (a `Date` or epoch ms, not in
   * the past).
   *
   * @example
   * ```ts
   * await mq.scheduler().at(new Date('2027-01-01T09:00:00Z'), '', 'new-year', { hi: true })
   * ```
   */
  async at<T>(
    date: Date | number,
    exchange: string,
    routingKey: string,
    payload: T,
    options: ScheduleOptions = {},
  ): Promise<void> {
    const dueAt = date instanceof Date ? date.getTime() : date
    if (typeof dueAt !== 'number' || !Number.isFinite(dueAt)) {
      throw new ConfigurationError(
        `at(date) must be a valid Date or epoch milliseconds; got ${String(date)}`,
      )
    }
    const now = Date.now()
    if (dueAt < now) {
      throw new ConfigurationError(
        `at(date) is in the past: ${new Date(dueAt).toISOString()} is ${now - dueAt} ms before now`,
      )
    }
    await this.#schedule(dueAt, exchange, routingKey, payload, options, 'at')
  }

  /**
   * Runs a control consumer on `acemq.schedule.due` here: due messages are published to their
   * destination, the rest go back up the ladder. Several processes (or calls) may run one at
   * once; each message is delivered at least once.
   */
  async startDelivering(options: DeliverOptions = {}): Promise<void> {
    this.#host.assertOpen()
    if (this.#stopping.signal.aborted) this.#stopping = new AbortController()
    const prefetch = options.prefetch ?? DEFAULT_SCHEDULE_PREFETCH
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 1_000) {
      throw new ConfigurationError(
        `startDelivering(options.prefetch) must be a whole number from 1 to 1000; got ${String(prefetch)}`,
      )
    }
    await this.#declare()
    const consumer = await this.#host.consume<unknown>(
      SCHEDULE_DUE_QUEUE,
      // Every held message runs at once: one waiting out its last second, or being tried
      // again every 5 s, must not hold up the others.
      ConsumerOptions.defaults().withPrefetch(prefetch).withConcurrency(prefetch),
      (message, context) => this.#onDue(message, context),
    )
    this.#consumers.push(consumer)
    this.#unregisterHealth ??= this.#host.registerHealth({
      name: 'scheduler',
      report: () => this.#report(),
    })
  }

  /**
   * Stops this scheduler's control consumers (a due message being tried again goes back to
   * the control queue). Scheduling goes on working.
   */
  async close(): Promise<void> {
    this.#stopping.abort()
    this.#unregisterHealth?.()
    this.#unregisterHealth = undefined
    await Promise.all(this.#consumers.splice(0).map((consumer) => consumer.close()))
  }

  /**
   * The connection is closing: a due message waiting out its last second or being tried again
   * goes back to the control queue now, rather than hold the drain open. @internal
   */
  connectionClosing(): void {
    this.#stopping.abort()
  }

  async #schedule(
    dueAt: number,
    exchange: string,
    routingKey: string,
    payload: unknown,
    options: ScheduleOptions,
    method: 'in' | 'at',
  ): Promise<void> {
    assertName(exchange, `${method}(exchange)`)
    assertName(routingKey, `${method}(routingKey)`)
    this.#host.assertOpen()
    const { contentType, headers, ...envelope } = options
    const { message } = encodeMessage(this.#host, {
      exchange: SCHEDULE_EXCHANGE,
      routingKey: SCHEDULE_DUE_QUEUE,
      payload,
      contentType,
      envelope,
      headers,
      argument: `${method}(payload)`,
    })
    const payloadType = message.properties.contentType ?? LADDER_CONTENT_TYPE
    await this.#declare()
    await this.#host.transport.publish(
      onLadder(
        {
          ...message,
          headers: {
            ...message.headers,
            ...(exchange !== '' && { [SCHEDULE_HEADERS.exchange]: exchange }),
            ...(routingKey !== '' && { [SCHEDULE_HEADERS.routingKey]: routingKey }),
            [SCHEDULE_HEADERS.dueAt]: { '!': 'long', value: dueAt },
            [SCHEDULE_HEADERS.contentType]: payloadType,
          },
        },
        dueAt - Date.now(),
      ),
    )
    this.#scheduled++
    this.#event({ exchange, routingKey, outcome: 'scheduled' })
  }

  async #onDue(message: Message<unknown>, context: HandlerContext): Promise<AckResult> {
    const h = message.headers
    // Empty values are left out on the wire: no exchange is the default exchange.
    const exchange = headerString(h[SCHEDULE_HEADERS.exchange]) ?? ''
    const routingKey = headerString(h[SCHEDULE_HEADERS.routingKey]) ?? ''
    const dueAt = headerInteger(h[SCHEDULE_HEADERS.dueAt])
    if (dueAt === undefined) {
      throw new FatalError(`not a scheduled message: it has no ${SCHEDULE_HEADERS.dueAt}`)
    }
    const signal = AbortSignal.any([context.signal, this.#stopping.signal])
    const remaining = dueAt - Date.now()
    const ladderHeaders: Headers = {}
    const destinationHeaders: Headers = {}
    for (const [key, value] of Object.entries(h)) {
      if (DEAD_LETTER_HEADERS.has(key)) continue
      ladderHeaders[key] = key === SCHEDULE_HEADERS.dueAt ? { '!': 'long', value: dueAt } : value
      if (!key.startsWith('x-schedule-')) destinationHeaders[key] = value
    }
    const common = { body: message.body, persistent: true, mandatory: true }
    if (remaining > 0 && rungFor(remaining) !== undefined) {
      // Up the ladder again: the next rung that does not overshoot.
      const hop: OutgoingMessage = {
        ...common,
        exchange: SCHEDULE_EXCHANGE,
        routingKey: SCHEDULE_DUE_QUEUE,
        headers: writeEnvelope(message.envelope, ladderHeaders),
        properties: { contentType: LADDER_CONTENT_TYPE, messageId: message.envelope.id },
      }
      return this.#publishInPlace(onLadder(hop, remaining), signal, undefined)
    }
    // Less than the smallest rung left: wait it out here, then deliver.
    if (remaining > 0 && !(await sleep(remaining, signal))) return Ack.release()
    const contentType = headerString(h[SCHEDULE_HEADERS.contentType])
    const delivery: OutgoingMessage = {
      ...common,
      exchange,
      routingKey,
      headers: writeEnvelope(message.envelope, destinationHeaders),
      properties: {
        ...(contentType !== undefined && { contentType }),
        messageId: message.envelope.id,
      },
    }
    return this.#publishInPlace(delivery, signal, dueAt)
  }

  /**
   * Publishes (confirmed), trying again in place every 5 s while it fails: a due message is
   * never dropped, and never dead-lettered for a destination that is missing for a while.
   */
  async #publishInPlace(
    outgoing: OutgoingMessage,
    signal: AbortSignal,
    dueAt: number | undefined,
  ): Promise<AckResult> {
    let failing = false
    try {
      for (;;) {
        try {
          await this.#host.transport.publish(outgoing, { lane: 'engine', signal })
          if (dueAt !== undefined) {
            this.#delivered++
            this.#event({
              exchange: outgoing.exchange,
              routingKey: outgoing.routingKey,
              outcome: 'delivered',
              lateMs: Math.max(0, Date.now() - dueAt),
            })
          }
          return Ack.accept()
        } catch (error) {
          if (signal.aborted) return Ack.release()
          this.#failures++
          this.#lastFailure = `${outgoing.exchange}/${outgoing.routingKey}: ${describeError(error)}`
          if (!failing) this.#retrying++
          failing = true
          this.#host.reportError(error, `scheduler: ${this.#lastFailure}; trying again in 5 s`)
          this.#event({
            exchange: outgoing.exchange,
            routingKey: outgoing.routingKey,
            outcome: 'failed',
          })
          if (!(await sleep(SCHEDULE_RETRY_MS, signal))) return Ack.release()
        }
      }
    } finally {
      if (failing) this.#retrying--
    }
  }

  #declare(): Promise<void> {
    this.#declared ??= this.#host.transport.declare(scheduleDeclarations())
    this.#declared.catch(() => (this.#declared = undefined))
    return this.#declared
  }

  #event(info: ScheduleEventInfo): void {
    this.#host.instrumentation?.scheduleEvent?.(info)
  }

  #report(): HealthReport {
    const details: Record<string, string> = {
      scheduled: String(this.#scheduled),
      delivered: String(this.#delivered),
      failures: String(this.#failures),
      retrying: String(this.#retrying),
    }
    if (this.#retrying > 0 && this.#lastFailure !== undefined)
      details['lastFailure'] = this.#lastFailure
    return { name: 'scheduler', status: this.#retrying > 0 ? 'DEGRADED' : 'UP', details }
  }
}

/** `message` routed to the rung for `remainingMs`, or to the control queue when none fits. */
function onLadder(message: OutgoingMessage, remainingMs: number): OutgoingMessage {
  const rung = rungFor(remainingMs)
  return {
    ...message,
    exchange: SCHEDULE_EXCHANGE,
    routingKey: rung?.queue ?? SCHEDULE_DUE_QUEUE,
    properties: { ...message.properties, contentType: LADDER_CONTENT_TYPE },
  }
}
