import fc from 'fast-check'

/** What a handler does on one run of a message. */
export type Behaviour =
  | { readonly kind: 'ok' }
  | { readonly kind: 'accept' }
  | { readonly kind: 'throw' }
  | { readonly kind: 'fatal' }
  | { readonly kind: 'retry'; readonly delayMs: number | undefined }
  | { readonly kind: 'park' }
  | { readonly kind: 'dead-letter' }
  | { readonly kind: 'release' }
  /** Works for `ms`, honouring the signal (an abort makes it throw). */
  | { readonly kind: 'slow'; readonly ms: number }
  /** Works for `ms` and ignores the signal, then throws. */
  | { readonly kind: 'fail-after'; readonly ms: number }
  /** Works for `ms` and ignores the signal, then accepts. */
  | { readonly kind: 'stubborn'; readonly ms: number }
  /** Returns a plain object with a `kind` field: an accept. */
  | { readonly kind: 'odd'; readonly value: 'release' | 'park' | 'dead-letter' | 'retry' }
  /** Publishes a child message, then accepts (whether or not the publish was confirmed). */
  | { readonly kind: 'publish'; readonly to: PublishTarget; readonly afterMs: number }
  /** Calls `mq.drainConsumers()` from inside, then accepts. */
  | { readonly kind: 'drain'; readonly timeoutMs: number; readonly afterMs?: number }
  /** Calls `mq.close()` from inside, then accepts. */
  | { readonly kind: 'close'; readonly drainMs: number; readonly afterMs?: number }
  /** Calls its own consumer's `close()` from inside, then accepts. */
  | { readonly kind: 'close-consumer'; readonly drainMs: number; readonly afterMs?: number }

/** Where a handler's child message goes: a consumed queue, a queue nobody reads, or nowhere. */
export type PublishTarget = 0 | 1 | 'sink' | 'missing-exchange'

/** One queue and how it is consumed. */
export interface QueueConfig {
  readonly type: 'classic' | 'quorum'
  /** A quorum queue's delivery limit (requeues before it dead-letters). */
  readonly deliveryLimit: number | undefined
  /** The broker's consumer timeout on this queue's channels. */
  readonly consumerTimeoutMs: number | undefined
  readonly retry:
    | { readonly kind: 'none'; readonly delayMs: number }
    | { readonly kind: 'fixed'; readonly attempts: number; readonly delayMs: number }
    | { readonly kind: 'exponential'; readonly attempts: number; readonly delayMs: number }
    /** Waits in rung queues in the broker. */
    | { readonly kind: 'broker'; readonly attempts: number; readonly delayMs: number }
  readonly idempotent: boolean
  readonly claimTimeoutMs: number
  readonly storeTimeoutMs: number
  readonly inProgressDelayMs: number
  readonly heldTimeoutMs: number
  /** Consumers on it: prefetch and concurrency of each. */
  readonly consumers: readonly { readonly prefetch: number; readonly concurrency: number }[]
}

/** A message published by the schedule. */
export interface MessagePlan {
  readonly queue: 0 | 1
  readonly at: number
  /** Its behaviour on each run; the last one repeats. */
  readonly script: readonly Behaviour[]
  /** Published raw, as another AceMQ library would, with headers the engine does not know. */
  readonly foreign: boolean
}

/** Something done to the connection from outside, or a fault. */
export type Event =
  | { readonly kind: 'pause' }
  | { readonly kind: 'resume' }
  | {
      readonly kind: 'drain'
      readonly timeoutMs: number
      readonly abortAfterMs: number | undefined
    }
  | { readonly kind: 'close'; readonly drainMs: number }
  | { readonly kind: 'close-consumer'; readonly consumer: number; readonly drainMs: number }
  | {
      readonly kind: 'connection-loss'
      readonly which: 'both' | 'publish' | 'consume'
      readonly outageMs: number
    }
  | { readonly kind: 'channel-close'; readonly queue: 0 | 1 }
  | {
      readonly kind: 'nack'
      readonly count: number
      readonly lane: 'application' | 'engine' | 'any'
    }
  | {
      readonly kind: 'unroutable'
      readonly queue: 0 | 1
      readonly target: 'source' | 'dlq' | 'parked' | 'rung'
      readonly forMs: number
    }
  | { readonly kind: 'late-confirm'; readonly count: number; readonly delayMs: number }
  | {
      readonly kind: 'store-fault'
      readonly op: 'claim' | 'confirm' | 'release' | 'any'
      readonly fault: 'error' | 'hang' | 'late'
      readonly count: number
      readonly delayMs: number
    }
  | { readonly kind: 'clock-jump'; readonly ms: number }
  | { readonly kind: 'missing-exchange-publish' }

/** A whole schedule: the world, the messages and the timed events. */
export interface Schedule {
  readonly seed: number
  readonly queues: readonly QueueConfig[]
  readonly messages: readonly MessagePlan[]
  readonly events: readonly { readonly at: number; readonly event: Event }[]
  /** The drain of the final close. */
  readonly finalDrainMs: number
}

/** The last time a schedule event happens (virtual ms). */
export const SCHEDULE_SPAN_MS = 60_000

const at = fc.integer({ min: 0, max: SCHEDULE_SPAN_MS })
const shortMs = fc.constantFrom(0, 1, 10, 100, 500, 2_000)
const drainMs = fc.constantFrom(0, 50, 1_000, 10_000, 3_000_000_000)

const terminal: fc.Arbitrary<Behaviour> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ kind: 'ok' } as const) },
  fc.constant({ kind: 'accept' } as const),
  fc.constant({ kind: 'fatal' } as const),
  fc.constant({ kind: 'park' } as const),
  fc.constant({ kind: 'dead-letter' } as const),
  fc.record({ kind: fc.constant('slow' as const), ms: fc.constantFrom(10, 300, 3_000, 40_000) }),
  fc.record({ kind: fc.constant('stubborn' as const), ms: fc.constantFrom(10, 3_000, 40_000) }),
  fc.record({
    kind: fc.constant('odd' as const),
    value: fc.constantFrom('release', 'park', 'dead-letter', 'retry') as fc.Arbitrary<
      'release' | 'park' | 'dead-letter' | 'retry'
    >,
  }),
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('publish' as const),
      to: fc.constantFrom<PublishTarget>(0, 1, 'sink', 'missing-exchange'),
      afterMs: shortMs,
    }),
  },
  fc.record({ kind: fc.constant('drain' as const), timeoutMs: drainMs }),
  fc.record({ kind: fc.constant('close' as const), drainMs }),
  fc.record({ kind: fc.constant('close-consumer' as const), drainMs }),
)

const failing: fc.Arbitrary<Behaviour> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'throw' } as const) },
  fc.record({
    kind: fc.constant('retry' as const),
    delayMs: fc.constantFrom(undefined, 0, 50, 1_000, 3_000_000_000),
  }),
  fc.constant({ kind: 'release' } as const),
  fc.record({ kind: fc.constant('fail-after' as const), ms: fc.constantFrom(10, 3_000, 40_000) }),
)

/** A script: a few failures, then a behaviour that ends the message's story. */
const script = fc
  .tuple(fc.array(fc.oneof(failing, terminal), { maxLength: 3 }), terminal)
  .map(([prefix, last]) => [...prefix, last])

const queueConfig: fc.Arbitrary<QueueConfig> = fc.record({
  type: fc.constantFrom('classic', 'quorum') as fc.Arbitrary<'classic' | 'quorum'>,
  deliveryLimit: fc.option(fc.integer({ min: 2, max: 6 }), { nil: undefined }),
  consumerTimeoutMs: fc.option(fc.constantFrom(60_000, 150_000), { nil: undefined, freq: 3 }),
  retry: fc.oneof(
    fc.record({ kind: fc.constant('none' as const), delayMs: fc.constantFrom(10, 1_000) }),
    fc.record({
      kind: fc.constant('fixed' as const),
      attempts: fc.integer({ min: 1, max: 4 }),
      delayMs: fc.constantFrom(10, 500),
    }),
    fc.record({
      kind: fc.constant('exponential' as const),
      attempts: fc.integer({ min: 2, max: 4 }),
      delayMs: fc.constantFrom(100, 1_000),
    }),
    fc.record({
      kind: fc.constant('broker' as const),
      attempts: fc.integer({ min: 2, max: 4 }),
      delayMs: fc.constantFrom(1_000, 5_000),
    }),
  ),
  idempotent: fc.boolean(),
  claimTimeoutMs: fc.constantFrom(30_000, 300_000),
  storeTimeoutMs: fc.constantFrom(200, 2_000),
  inProgressDelayMs: fc.constantFrom(100, 1_000),
  heldTimeoutMs: fc.constantFrom(1_000, 15_000),
  consumers: fc.array(
    fc.record({
      prefetch: fc.integer({ min: 1, max: 5 }),
      concurrency: fc.integer({ min: 1, max: 3 }),
    }),
    { minLength: 1, maxLength: 2 },
  ),
})

const event = (queues: number): fc.Arbitrary<Event> => {
  const queue = fc.constantFrom(...([0, 1] as const).slice(0, queues)) as fc.Arbitrary<0 | 1>
  return fc.oneof(
    fc.constant({ kind: 'pause' } as const),
    { weight: 2, arbitrary: fc.constant({ kind: 'resume' } as const) },
    fc.record({
      kind: fc.constant('drain' as const),
      timeoutMs: drainMs,
      abortAfterMs: fc.option(fc.constantFrom(0, 100, 5_000), { nil: undefined, freq: 3 }),
    }),
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), drainMs }) },
    fc.record({
      kind: fc.constant('close-consumer' as const),
      consumer: fc.integer({ min: 0, max: 3 }),
      drainMs,
    }),
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('connection-loss' as const),
        which: fc.constantFrom('both', 'publish', 'consume') as fc.Arbitrary<
          'both' | 'publish' | 'consume'
        >,
        outageMs: fc.constantFrom(0, 100, 5_000),
      }),
    },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('channel-close' as const), queue }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('nack' as const),
        count: fc.integer({ min: 1, max: 3 }),
        lane: fc.constantFrom('application', 'engine', 'any') as fc.Arbitrary<
          'application' | 'engine' | 'any'
        >,
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('unroutable' as const),
        queue,
        target: fc.constantFrom('source', 'dlq', 'parked', 'rung') as fc.Arbitrary<
          'source' | 'dlq' | 'parked' | 'rung'
        >,
        forMs: fc.constantFrom(100, 5_000, 40_000),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('late-confirm' as const),
        count: fc.integer({ min: 1, max: 5 }),
        delayMs: fc.constantFrom(10, 1_000, 20_000),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('store-fault' as const),
        op: fc.constantFrom('claim', 'confirm', 'release', 'any') as fc.Arbitrary<
          'claim' | 'confirm' | 'release' | 'any'
        >,
        fault: fc.constantFrom('error', 'hang', 'late') as fc.Arbitrary<'error' | 'hang' | 'late'>,
        count: fc.integer({ min: 1, max: 4 }),
        delayMs: fc.constantFrom(10, 1_000, 5_000),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('clock-jump' as const),
        ms: fc.constantFrom(1_000, 60_000, 400_000),
      }),
    },
    fc.constant({ kind: 'missing-exchange-publish' } as const),
  )
}

/** Schedules: one or two queues, up to 30 messages, up to 20 events. */
export const schedules: fc.Arbitrary<Schedule> = fc
  .tuple(
    fc.integer({ min: 0, max: 0x7fffffff }),
    fc.array(queueConfig, { minLength: 1, maxLength: 2 }),
  )
  .chain(([seed, queues]) =>
    fc.record({
      seed: fc.constant(seed),
      queues: fc.constant(queues),
      messages: fc.array(
        fc.record({
          queue: fc.constantFrom(...([0, 1] as const).slice(0, queues.length)) as fc.Arbitrary<
            0 | 1
          >,
          at: fc.oneof(fc.constant(0), at),
          script,
          foreign: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
        }),
        { minLength: 1, maxLength: 30 },
      ),
      events: fc.array(fc.record({ at, event: event(queues.length) }), { maxLength: 20 }),
      finalDrainMs: fc.constantFrom(0, 1_000, 30_000),
    }),
  )
