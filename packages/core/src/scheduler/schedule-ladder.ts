import type { Declaration } from '../transport/transport.js'

/** The family's schedule exchange (direct): rung queues and the control queue are bound to it. */
export const SCHEDULE_EXCHANGE = 'acemq.schedule'

/** The control queue: messages come here when a rung's TTL ends; its consumer sends them on. */
export const SCHEDULE_DUE_QUEUE = 'acemq.schedule.due'

/** The schedule headers (outside `x-acemq-`, never passed on to the destination). */
export const SCHEDULE_HEADERS = Object.freeze({
  exchange: 'x-schedule-exchange',
  routingKey: 'x-schedule-routing-key',
  /** Epoch milliseconds, a 64-bit long. */
  dueAt: 'x-schedule-due-at',
  /** The payload's content type; the message itself travels the ladder as bytes. */
  contentType: 'x-schedule-content-type',
})

/** One rung of the ladder: a queue whose messages wait `ttlMs`, then go to the control queue. */
export interface ScheduleRung {
  readonly queue: string
  readonly ttlMs: number
}

/** The family's ladder, longest first: 1 h, 10 min, 1 min, 10 s, 1 s. */
export const SCHEDULE_RUNGS: readonly ScheduleRung[] = Object.freeze([
  { queue: 'acemq.schedule.1h', ttlMs: 3_600_000 },
  { queue: 'acemq.schedule.10m', ttlMs: 600_000 },
  { queue: 'acemq.schedule.1m', ttlMs: 60_000 },
  { queue: 'acemq.schedule.10s', ttlMs: 10_000 },
  { queue: 'acemq.schedule.1s', ttlMs: 1_000 },
])

/** The smallest rung: a message due sooner than this waits in the control consumer instead. */
export const SMALLEST_RUNG_MS = 1_000

/** How long a due message whose destination does not route waits before it is tried again. */
export const SCHEDULE_RETRY_MS = 5_000

/**
 * The rung a message with `remainingMs` to wait goes to next: the longest that does not
 * overshoot, or `undefined` when less than the smallest rung is left.
 */
export function rungFor(remainingMs: number): ScheduleRung | undefined {
  return SCHEDULE_RUNGS.find((rung) => rung.ttlMs <= remainingMs)
}

/**
 * The ladder as the family declares it: the exchange, each rung queue (classic, exactly three
 * arguments, the TTL declared 64-bit) bound by its own name, and the control queue bound by
 * its name.
 */
export function scheduleDeclarations(): Declaration[] {
  const declarations: Declaration[] = [
    { kind: 'exchange', name: SCHEDULE_EXCHANGE, type: 'direct', durable: true, arguments: {} },
  ]
  for (const rung of SCHEDULE_RUNGS) {
    declarations.push(
      {
        kind: 'queue',
        name: rung.queue,
        type: 'classic',
        durable: true,
        arguments: {
          'x-message-ttl': { '!': 'long', value: rung.ttlMs },
          'x-dead-letter-exchange': SCHEDULE_EXCHANGE,
          'x-dead-letter-routing-key': SCHEDULE_DUE_QUEUE,
        },
      },
      bind(rung.queue),
    )
  }
  declarations.push(
    { kind: 'queue', name: SCHEDULE_DUE_QUEUE, type: 'classic', durable: true, arguments: {} },
    bind(SCHEDULE_DUE_QUEUE),
  )
  return declarations
}

function bind(queue: string): Declaration {
  return { kind: 'binding', queue, exchange: SCHEDULE_EXCHANGE, routingKey: queue, arguments: {} }
}
