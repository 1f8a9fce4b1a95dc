import { expect } from 'vitest'
import type { Behaviour, Event, MessagePlan, QueueConfig, Schedule } from './schedule.js'
import type { MessageRecord, World } from './simulation.js'

/** A named schedule, run through the same harness, and what it must show beyond the invariants. */
export interface Regression {
  readonly name: string
  readonly schedule: Schedule
  readonly check?: (world: World) => void
}

const queue = (changes: Partial<QueueConfig> = {}): QueueConfig => ({
  type: 'classic',
  deliveryLimit: undefined,
  consumerTimeoutMs: undefined,
  retry: { kind: 'none', delayMs: 1_000 },
  idempotent: false,
  claimTimeoutMs: 30_000,
  storeTimeoutMs: 2_000,
  inProgressDelayMs: 100,
  heldTimeoutMs: 15_000,
  consumers: [{ prefetch: 5, concurrency: 2 }],
  ...changes,
})

const message = (script: Behaviour[], at = 0, changes: Partial<MessagePlan> = {}): MessagePlan => ({
  queue: 0,
  at,
  script,
  foreign: false,
  ...changes,
})

const schedule = (
  queues: QueueConfig[],
  messages: MessagePlan[],
  events: [number, Event][] = [],
  finalDrainMs = 30_000,
): Schedule => ({
  seed: 1,
  queues,
  messages,
  events: events.map(([at, event]) => ({ at, event })),
  finalDrainMs,
})

const ok: Behaviour = { kind: 'ok' }

/** Every message ran its handler to a success whose ack was written. */
function allAckedAfterSuccess(world: World): void {
  for (const record of world.messages.values()) {
    if (record.queueIndex === undefined) continue
    const acked = record.runs.some((r) => r.succeeded && r.delivery?.written?.kind === 'ack')
    expect(acked, `${record.id} acked after a success`).toBe(true)
  }
}

function runsOf(world: World, id: string): MessageRecord {
  const record = world.messages.get(id)
  if (record === undefined) throw new Error(`no message ${id}`)
  return record
}

/**
 * The items, each as a schedule that exercises it, plus the simulation's own findings
 * still open (sim-findings.md): those fail until the engine is fixed.
 */
export const regressions: readonly Regression[] = [
  {
    name: '(1) only the publishing connection drops while deliveries are held: they are handled once consuming resumes',
    schedule: schedule(
      [queue()],
      [message([ok], 10), message([ok], 10), message([ok], 10)],
      [
        [0, { kind: 'pause' }],
        [100, { kind: 'connection-loss', which: 'publish', outageMs: 1_000 }],
        [2_000, { kind: 'resume' }],
      ],
    ),
    check: allAckedAfterSuccess,
  },
  {
    name: '(2) a move whose copy comes back unroutable is held and tried again in process, never requeued through the delivery limit',
    schedule: schedule(
      [queue({ type: 'quorum', deliveryLimit: 2 })],
      [message([{ kind: 'park' }], 10)],
      [[0, { kind: 'unroutable', queue: 0, target: 'parked', forMs: 40_000 }]],
    ),
    check(world) {
      const deliveries = world.transport.deliveries.filter((d) => d.id === 'm0')
      expect(deliveries).toHaveLength(1)
      expect(deliveries[0]?.written).toMatchObject({ kind: 'ack' })
      expect(world.transport.inner.peek('sim.q0.parked')).toHaveLength(1)
      expect(world.transport.inner.peek('sim.q0.dlq')).toHaveLength(0)
    },
  },
  {
    name: '(2) a move whose copy is nacked is held and tried again, never requeued',
    schedule: schedule(
      [queue({ type: 'quorum', deliveryLimit: 2 })],
      [message([{ kind: 'dead-letter' }], 10)],
      [[0, { kind: 'nack', count: 3, lane: 'engine' }]],
    ),
    check(world) {
      expect(world.transport.deliveries.filter((d) => d.id === 'm0')).toHaveLength(1)
      expect(world.transport.inner.peek('sim.q0.dlq')).toHaveLength(1)
    },
  },
  {
    name: '(3) close() while a handler publishes: the publish is confirmed and the handler acked',
    schedule: schedule(
      [queue()],
      [message([{ kind: 'publish', to: 'sink', afterMs: 2_000 }], 10)],
      [[500, { kind: 'close', drainMs: 10_000 }]],
    ),
    check(world) {
      expect(runsOf(world, 'm0>1').publish?.outcome).toBe('confirmed')
      expect(world.transport.inner.peek('sim.sink')).toHaveLength(1)
      allAckedAfterSuccess({ ...world, messages: new Map([['m0', runsOf(world, 'm0')]]) })
    },
  },
  {
    name: '(4) drainConsumers() from inside a handler waits for the other handler, not for itself',
    schedule: schedule(
      [queue()],
      [
        message([{ kind: 'stubborn', ms: 3_000 }], 0),
        message([{ kind: 'drain', timeoutMs: 30_000 }], 10),
      ],
    ),
    check(world) {
      const drain = world.drains.find((d) => d.inside === 'm1')
      expect(drain).toMatchObject({ result: true, ended: 3_000 })
    },
  },
  {
    name: '(4) close() from inside a handler waits for the other handler, and the caller is acked',
    schedule: schedule(
      [queue()],
      [
        message([{ kind: 'stubborn', ms: 3_000 }], 0),
        message([{ kind: 'close', drainMs: 30_000 }], 10),
      ],
    ),
    check: allAckedAfterSuccess,
  },
  {
    name: '(4) a delivery started from inside a handler (its publish) does not borrow its identity: a drain waits for both',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 5, concurrency: 2 }] })],
      [message([{ kind: 'publish', to: 0, afterMs: 0 }, ok], 0)],
      [[5, { kind: 'drain', timeoutMs: 60_000, abortAfterMs: undefined }]],
    ),
    check(world) {
      expect(world.drains[0]?.result).toBe(true)
      allAckedAfterSuccess(world)
    },
  },
  {
    name: '(5) an application publish to a missing exchange fails none of the engine’s moves',
    schedule: schedule(
      [queue()],
      [message([{ kind: 'dead-letter' }], 10)],
      [
        [0, { kind: 'late-confirm', count: 3, delayMs: 1_000 }],
        [11, { kind: 'missing-exchange-publish' }],
      ],
    ),
    check(world) {
      const copy = world.transport.publishes.find((p) => p.routingKey === 'sim.q0.dlq')
      expect(copy).toMatchObject({ lane: 'engine', outcome: 'confirmed' })
      expect(world.transport.inner.peek('sim.q0.dlq')).toHaveLength(1)
    },
  },
  {
    name: '(6)(7) retry and dead-letter copies keep unknown x-acemq-* headers and typed integer widths',
    schedule: schedule(
      [queue({ retry: { kind: 'none', delayMs: 10 } })],
      [message([{ kind: 'throw' }, { kind: 'dead-letter' }], 0, { foreign: true })],
    ),
    check(world) {
      const copies = world.transport.publishes.filter((p) => p.id === 'm0' && !p.byHarness)
      expect(copies.map((c) => c.routingKey)).toEqual(['sim.q0', 'sim.q0.dlq'])
    },
  },
  {
    name: '(8) a channel closing: deliveries buffered on it never run, and each runs once when redelivered',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 5, concurrency: 1 }] })],
      [message([{ kind: 'stubborn', ms: 1_000 }]), message([ok]), message([ok]), message([ok])],
      [[500, { kind: 'channel-close', queue: 0 }]],
    ),
    check(world) {
      for (const id of ['m1', 'm2', 'm3']) expect(runsOf(world, id).runs).toHaveLength(1)
    },
  },
  {
    name: '(8) the consumer timeout closes the channel under a slow handler: its buffered deliveries never run there',
    schedule: schedule(
      [queue({ consumerTimeoutMs: 2_000, consumers: [{ prefetch: 5, concurrency: 1 }] })],
      [message([{ kind: 'stubborn', ms: 3_000 }, ok]), message([ok]), message([ok])],
    ),
    check(world) {
      expect(world.transport.subscriptions.some((s) => s.consumerTimeouts > 0)).toBe(true)
      allAckedAfterSuccess(world)
    },
  },
  {
    name: '(8) a pause longer than the consumer timeout hands held deliveries back (withHeldTimeout) and never times out',
    schedule: schedule(
      [queue({ consumerTimeoutMs: 60_000, heldTimeoutMs: 15_000 })],
      [message([ok], 10), message([ok], 10)],
      [
        [0, { kind: 'pause' }],
        [120_000, { kind: 'resume' }],
      ],
    ),
    check(world) {
      expect(world.transport.subscriptions.every((s) => s.consumerTimeouts === 0)).toBe(true)
      allAckedAfterSuccess(world)
    },
  },
  {
    name: '(9) a stale claim owner’s late release never frees the newer claim',
    schedule: schedule(
      [
        queue({
          idempotent: true,
          claimTimeoutMs: 30_000,
          consumers: [
            { prefetch: 1, concurrency: 1 },
            { prefetch: 1, concurrency: 1 },
          ],
        }),
      ],
      [message([{ kind: 'fail-after', ms: 40_000 }, { kind: 'stubborn', ms: 20_000 }, ok])],
      [[1_000, { kind: 'channel-close', queue: 0 }]],
    ),
    check(world) {
      // The first owner failed at 40 s and released late; the second, holding the claim since
      // its lease lapsed, succeeded alone.
      const runs = runsOf(world, 'm0').runs
      expect(runs.filter((r) => r.succeeded)).toHaveLength(1)
      expect(runs).toHaveLength(2)
      expect(runs[0]?.claim?.releasedAt).toBe(40_000)
      expect(runs[1]?.claim?.confirmedAt).toBeGreaterThan(40_000)
    },
  },
  {
    name: '(11) a retry wait does not count in inFlight, and a drain hands it back at once',
    schedule: schedule(
      [queue()],
      [message([{ kind: 'retry', delayMs: 3_600_000 }, ok], 0)],
      [[1_000, { kind: 'drain', timeoutMs: 3_000_000_000, abortAfterMs: undefined }]],
    ),
    check(world) {
      expect(world.drains[0]).toMatchObject({ result: true, began: 1_000, ended: 1_000 })
    },
  },
  {
    name: '(12) a retry wait does not occupy the handler slot',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 5, concurrency: 1 }] })],
      [message([{ kind: 'retry', delayMs: 3_600_000 }, ok], 0), message([ok], 100)],
    ),
    check(world) {
      expect(runsOf(world, 'm1').runs[0]?.startedAt).toBe(100)
    },
  },
  {
    name: '(13) a handler’s own return value with a kind field is an accept',
    schedule: schedule(
      [queue({ retry: { kind: 'fixed', attempts: 3, delayMs: 10 } })],
      (['release', 'park', 'dead-letter', 'retry'] as const).map((value) =>
        message([{ kind: 'odd', value }]),
      ),
    ),
    check(world) {
      allAckedAfterSuccess(world)
      for (const record of world.messages.values()) expect(record.runs).toHaveLength(1)
    },
  },
  {
    name: '(14) a drain of 35 days waits for the handler: it does not answer after 1 ms',
    schedule: schedule(
      [queue()],
      [message([{ kind: 'stubborn', ms: 40_000 }], 0)],
      [[10, { kind: 'drain', timeoutMs: 3_000_000_000, abortAfterMs: undefined }]],
    ),
    check(world) {
      expect(world.drains[0]).toMatchObject({ result: true, ended: 40_000 })
    },
  },
  {
    name: '(14) a retry delay of 35 days waits: the message is not retried at once',
    schedule: schedule(
      [queue()],
      [message([{ kind: 'retry', delayMs: 3_000_000_000 }, ok], 0)],
      [],
      0,
    ),
    check(world) {
      expect(runsOf(world, 'm0').runs).toHaveLength(1)
      expect(world.transport.inner.peek('sim.q0')).toHaveLength(1)
    },
  },
  {
    name: '(16) hung store calls time out (withStoreTimeout): the message is handled once the store answers',
    schedule: schedule(
      [queue({ idempotent: true, storeTimeoutMs: 200 })],
      [message([ok], 10)],
      [[0, { kind: 'store-fault', op: 'claim', fault: 'hang', count: 2, delayMs: 0 }]],
    ),
    check: allAckedAfterSuccess,
  },
  {
    name: '(16) a confirm that hangs times out and is tried again; the message is acked once',
    schedule: schedule(
      [queue({ idempotent: true, storeTimeoutMs: 200 })],
      [message([ok], 10)],
      [[0, { kind: 'store-fault', op: 'confirm', fault: 'hang', count: 2, delayMs: 0 }]],
    ),
    check(world) {
      allAckedAfterSuccess(world)
      expect(runsOf(world, 'm0').runs).toHaveLength(1)
    },
  },
  {
    name: 'finding 4: two handlers that drain from inside do not wait for each other',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 5, concurrency: 2 }] })],
      [
        message([{ kind: 'drain', timeoutMs: 3_000_000_000, afterMs: 100 }]),
        message([{ kind: 'drain', timeoutMs: 3_000_000_000, afterMs: 100 }]),
      ],
    ),
    check(world) {
      for (const drain of world.drains) expect(drain).toMatchObject({ result: true, ended: 100 })
    },
  },
  {
    name: 'finding 4: a handler closing its consumer and another closing the connection do not wait for each other',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 5, concurrency: 2 }] })],
      [
        message([{ kind: 'close-consumer', drainMs: 3_000_000_000, afterMs: 100 }]),
        message([{ kind: 'close', drainMs: 3_000_000_000, afterMs: 100 }]),
      ],
    ),
    check: allAckedAfterSuccess,
  },
  {
    name: 'finding 5: a drain called from a handler answers when the connection closes under it',
    schedule: {
      seed: 1819796069,
      queues: [
        queue({
          consumerTimeoutMs: 60_000,
          heldTimeoutMs: 1_000,
          storeTimeoutMs: 200,
          consumers: [{ prefetch: 3, concurrency: 3 }],
        }),
      ],
      messages: [
        message([
          { kind: 'throw' },
          { kind: 'drain', timeoutMs: 3_000_000_000 },
          { kind: 'odd', value: 'release' },
        ]),
        message([ok]),
      ],
      events: [
        { at: 0, event: { kind: 'late-confirm', count: 1, delayMs: 20_000 } },
        { at: 1_001, event: { kind: 'close', drainMs: 0 } },
      ],
      finalDrainMs: 0,
    },
  },
  {
    name: 'finding 5: a drain pending when close gives up on a handler answers',
    schedule: schedule(
      [queue({ consumers: [{ prefetch: 2, concurrency: 1 }] })],
      [message([{ kind: 'fail-after', ms: 40_000 }, { kind: 'dead-letter' }])],
      [
        [0, { kind: 'drain', timeoutMs: 3_000_000_000, abortAfterMs: undefined }],
        [0, { kind: 'close', drainMs: 0 }],
      ],
      0,
    ),
  },
  {
    // Finding 7 (100,000 schedules): a lease lapsed under a 40 s handler, and in the same virtual
    // millisecond the redelivery took the claim over before the first run's confirm landed. The
    // judge compared millisecond stamps (confirm <= grant) and called it a duplicate after a
    // confirm; it now compares the order the store saw.
    name: 'finding 7: a lapsed lease taken over in the millisecond the first run confirms is not a rerun after a confirm',
    schedule: schedule(
      [
        queue({
          idempotent: true,
          consumerTimeoutMs: 150_000,
          deliveryLimit: 2,
          consumers: [
            { prefetch: 4, concurrency: 2 },
            { prefetch: 1, concurrency: 1 },
          ],
        }),
      ],
      [
        message([{ kind: 'fail-after', ms: 40_000 }, { kind: 'accept' }], 0, { foreign: true }),
        message([ok], 0, { foreign: true }),
        message([{ kind: 'slow', ms: 40_000 }], 0, { foreign: true }),
        message([{ kind: 'dead-letter' }], 0, { foreign: true }),
      ],
      [[0, { kind: 'channel-close', queue: 0 }]],
      0,
    ),
    check(world) {
      const runs = runsOf(world, 'm2').runs
      expect(runs.filter((r) => r.succeeded)).toHaveLength(2)
      const [first, second] = runs
      expect(first?.claim?.confirmedAt).toBe(40_000)
      expect(second?.claim?.grantedAt).toBe(40_000)
    },
  },
  {
    // Finding 8: a handler drained from inside while close() waited for the other handler. When
    // that one settled, the drain answered first and its caller left the set of handlers
    // waiting inside; close() then saw none there, skipped the grace for them, and closed the
    // channel before the handler (still confirming its claim) could write its ack.
    name: 'finding 8: close() waits for a handler whose drain from inside answered in the same turn',
    schedule: {
      seed: 11,
      queues: [
        queue({
          deliveryLimit: 3,
          retry: { kind: 'exponential', attempts: 4, delayMs: 100 },
          idempotent: true,
          inProgressDelayMs: 1_000,
          heldTimeoutMs: 1_000,
          consumers: [
            { prefetch: 2, concurrency: 3 },
            { prefetch: 3, concurrency: 3 },
          ],
        }),
      ],
      messages: [
        message([{ kind: 'fail-after', ms: 10 }, ok], 0, { foreign: true }),
        message([{ kind: 'drain', timeoutMs: 10_000 }], 0, { foreign: true }),
      ],
      events: [{ at: 0, event: { kind: 'close', drainMs: 3_000_000_000 } }],
      finalDrainMs: 0,
    },
    check(world) {
      const runs = runsOf(world, 'm1').runs
      expect(runs).toHaveLength(1)
      expect(runs[0]?.succeeded).toBe(true)
      expect(runs[0]?.delivery?.written?.kind).toBe('ack')
    },
  },
  {
    // Finding 9: a consumer closed with a 10 s drain while one of its handlers waited inside a
    // drain of its own (for a handler elsewhere). The close does not wait for a handler waiting
    // inside, but closed the channel after 5 s of grace: the handler succeeded at 10 s, within
    // the drain its close was given, and its ack could no longer be written. The grace is now
    // what is left of the close's drain (at least 5 s).
    name: 'finding 9: a consumer close gives a handler waiting inside a drain the rest of its own drain before the channel closes',
    schedule: schedule(
      [
        queue({
          type: 'quorum',
          deliveryLimit: 5,
          consumerTimeoutMs: 60_000,
          idempotent: true,
          claimTimeoutMs: 300_000,
          storeTimeoutMs: 200,
          inProgressDelayMs: 1_000,
          heldTimeoutMs: 1_000,
          consumers: [
            { prefetch: 5, concurrency: 2 },
            { prefetch: 5, concurrency: 1 },
          ],
        }),
      ],
      [
        message([{ kind: 'throw' }, { kind: 'accept' }], 0, { foreign: true }),
        message([ok], 0, { foreign: true }),
        message([{ kind: 'throw' }, { kind: 'dead-letter' }], 0, { foreign: true }),
        message(
          [{ kind: 'throw' }, { kind: 'drain', timeoutMs: 10_000 }, { kind: 'close', drainMs: 0 }],
          0,
          { foreign: true },
        ),
        message([{ kind: 'fail-after', ms: 40_000 }, ok], 0, { foreign: true }),
        message([{ kind: 'publish', to: 'missing-exchange', afterMs: 0 }], 0, { foreign: true }),
        message([{ kind: 'accept' }], 0, { foreign: true }),
      ],
      [[1_001, { kind: 'close-consumer', consumer: 1, drainMs: 10_000 }]],
      0,
    ),
    check(world) {
      const runs = runsOf(world, 'm3').runs
      const drained = runs.find((r) => r.succeeded)
      expect(drained?.endedAt).toBe(11_000)
      expect(drained?.delivery?.written?.kind).toBe('ack')
    },
  },
  {
    // Finding 10: two releases failed once each (a store error) after handlers threw. The claims
    // stayed with owners that had let go, so the messages went round as in progress every 100 ms
    // until the 300 s leases lapsed: thousands of put-backs, reported as never settling. A release
    // is now tried again as a confirm is (100 ms, 500 ms, 2 s) before it is left to lapse.
    name: 'finding 10: a release that fails once is tried again, not left to stall its message for the whole lease',
    schedule: {
      seed: 1_556_000_572,
      queues: [
        queue({
          type: 'quorum',
          consumerTimeoutMs: 150_000,
          retry: { kind: 'exponential', attempts: 4, delayMs: 1_000 },
          idempotent: true,
          claimTimeoutMs: 300_000,
          heldTimeoutMs: 1_000,
          consumers: [
            { prefetch: 5, concurrency: 3 },
            { prefetch: 5, concurrency: 2 },
          ],
        }),
      ],
      messages: [
        message([{ kind: 'throw' }, ok], 30_617, { foreign: true }),
        message([{ kind: 'fail-after', ms: 3_000 }, ok], 11_978),
        message([{ kind: 'throw' }, { kind: 'close-consumer', drainMs: 10_000 }], 48_394),
        message([{ kind: 'drain', timeoutMs: 1_000 }], 0),
        message(
          [
            { kind: 'fail-after', ms: 40_000 },
            { kind: 'slow', ms: 3_000 },
          ],
          0,
          { foreign: true },
        ),
      ],
      events: [
        { at: 43_196, event: { kind: 'resume' } },
        {
          at: 36_734,
          event: { kind: 'store-fault', op: 'release', fault: 'error', count: 2, delayMs: 10 },
        },
        { at: 2_875, event: { kind: 'channel-close', queue: 0 } },
        { at: 43_708, event: { kind: 'unroutable', queue: 0, target: 'parked', forMs: 5_000 } },
        { at: 53_416, event: { kind: 'connection-loss', which: 'publish', outageMs: 100 } },
        { at: 46_573, event: { kind: 'connection-loss', which: 'publish', outageMs: 0 } },
        { at: 15_086, event: { kind: 'clock-jump', ms: 60_000 } },
      ],
      finalDrainMs: 1_000,
    },
    check(world) {
      // Each handler that threw under the failing releases ran again within seconds, not after
      // its 300 s lease.
      for (const id of ['m0', 'm1']) {
        const runs = runsOf(world, id).runs
        expect(
          runs.filter((r) => r.succeeded),
          id,
        ).toHaveLength(1)
        const [failed, succeeded] = [runs[0], runs.find((r) => r.succeeded)]
        expect((succeeded?.startedAt ?? Infinity) - (failed?.endedAt ?? 0), id).toBeLessThan(60_000)
      }
    },
  },
  {
    // Finding 11 (the harness, 100,000-schedule run): after a consumer closed from a handler with
    // a 50 ms drain, under late confirms, a claim stayed held and the message's deliveries went
    // round as in progress every 100 ms until the 300 s lease ran out; then everything settled
    // and every check passes. The judge allowed 20,000 timers after the faults healed and called
    // it never settling; the heal phase now allows 200,000 (a lease's worth of put-backs).
    name: 'finding 11: messages in progress until a lease held by a given-up handler lapses are waited for, not called a livelock',
    schedule: {
      seed: 92620640,
      queues: [
        {
          type: 'classic',
          deliveryLimit: 2,
          consumerTimeoutMs: 150000,
          retry: { kind: 'broker', attempts: 2, delayMs: 5000 },
          idempotent: true,
          claimTimeoutMs: 300000,
          storeTimeoutMs: 2000,
          inProgressDelayMs: 100,
          heldTimeoutMs: 1000,
          consumers: [
            { prefetch: 3, concurrency: 3 },
            { prefetch: 4, concurrency: 2 },
          ],
        },
        {
          type: 'classic',
          deliveryLimit: 6,
          consumerTimeoutMs: 60000,
          retry: { kind: 'fixed', attempts: 4, delayMs: 10 },
          idempotent: false,
          claimTimeoutMs: 300000,
          storeTimeoutMs: 200,
          inProgressDelayMs: 1000,
          heldTimeoutMs: 1000,
          consumers: [{ prefetch: 2, concurrency: 1 }],
        },
      ],
      messages: [
        {
          queue: 0,
          at: 9842,
          script: [
            { kind: 'fail-after', ms: 10 },
            { kind: 'throw' },
            { kind: 'publish', to: 'missing-exchange', afterMs: 1 },
          ],
          foreign: false,
        },
        { queue: 1, at: 12574, script: [{ kind: 'dead-letter' }], foreign: true },
        { queue: 1, at: 44338, script: [{ kind: 'ok' }], foreign: false },
        {
          queue: 0,
          at: 5036,
          script: [
            { kind: 'retry', delayMs: undefined },
            { kind: 'close-consumer', drainMs: 50 },
          ],
          foreign: false,
        },
        {
          queue: 1,
          at: 0,
          script: [{ kind: 'release' }, { kind: 'slow', ms: 300 }],
          foreign: true,
        },
        {
          queue: 0,
          at: 30119,
          script: [
            { kind: 'ok' },
            { kind: 'fail-after', ms: 3000 },
            { kind: 'ok' },
            { kind: 'ok' },
          ],
          foreign: false,
        },
        {
          queue: 1,
          at: 40319,
          script: [{ kind: 'retry', delayMs: 3000000000 }, { kind: 'dead-letter' }],
          foreign: false,
        },
      ],
      events: [
        { at: 420, event: { kind: 'late-confirm', count: 3, delayMs: 20000 } },
        { at: 26870, event: { kind: 'channel-close', queue: 0 } },
        { at: 34218, event: { kind: 'missing-exchange-publish' } },
        { at: 58952, event: { kind: 'connection-loss', which: 'publish', outageMs: 100 } },
        { at: 53678, event: { kind: 'late-confirm', count: 5, delayMs: 20000 } },
      ],
      finalDrainMs: 30000,
    },
  },
  {
    // Finding 12 (100,000-schedule run): a handler waited inside a drain of the connection (35
    // days) for a handler on another queue; that queue's consumer was closed with a 10 s drain and
    // gave up on its handler at 15 s. Giving up reported the handler gone before it left the
    // running set, so the drain looked, saw it still running, and was never told again: it never
    // answered. A close (35-day drain) then waited for the handler inside it for the rest of
    // those 35 days (with a fixed grace, it closed the channel under it and lost its ack). A
    // handler given up on now leaves the running set before anyone is told.
    name: 'finding 12: a drain from inside answers when another consumer’s close gives up on the handler it waits for',
    schedule: schedule(
      [
        queue({ type: 'quorum', consumers: [{ prefetch: 4, concurrency: 2 }] }),
        queue({ consumers: [{ prefetch: 1, concurrency: 1 }] }),
      ],
      [
        message([{ kind: 'fail-after', ms: 40_000 }, ok], 0, { queue: 1 }),
        message([{ kind: 'drain', timeoutMs: 3_000_000_000 }], 0),
      ],
      [
        [5, { kind: 'close-consumer', consumer: 1, drainMs: 10_000 }],
        [16_000, { kind: 'close', drainMs: 3_000_000_000 }],
      ],
      1_000,
    ),
    check(world) {
      const runs = runsOf(world, 'm1').runs
      expect(runs).toHaveLength(1)
      expect(runs[0]?.endedAt).toBe(15_005)
      expect(runs[0]?.delivery?.written?.kind).toBe('ack')
    },
  },
  {
    // Finding 13 (a 3,000-schedule run during the lifecycle refactor): two handlers of one consumer
    // both closed it, the first with a 35-day drain. The second call was handed the first's promise
    // without being counted as waiting inside a close, so the first close waited for the second
    // handler and the second handler for the first close: neither ever finished. Every handler
    // that closes its consumer now counts as inside until the close is done.
    name: 'finding 13: two handlers closing their own consumer do not wait for each other',
    schedule: {
      seed: 1_825_000_684,
      queues: [
        queue({
          consumerTimeoutMs: 60_000,
          retry: { kind: 'none', delayMs: 10 },
          idempotent: true,
          inProgressDelayMs: 1_000,
          consumers: [
            { prefetch: 2, concurrency: 3 },
            { prefetch: 2, concurrency: 2 },
          ],
        }),
      ],
      messages: [
        message([{ kind: 'drain', timeoutMs: 0 }, ok], 0, { foreign: true }),
        message([{ kind: 'close-consumer', drainMs: 3_000_000_000 }, ok], 0, { foreign: true }),
        message([ok], 0, { foreign: true }),
        message(
          [
            { kind: 'close', drainMs: 3_000_000_000 },
            { kind: 'publish', to: 0, afterMs: 0 },
          ],
          1,
          { foreign: true },
        ),
        message([{ kind: 'close-consumer', drainMs: 0 }], 0, { foreign: true }),
        message([ok], 0, { foreign: true }),
      ],
      events: [],
      finalDrainMs: 0,
    },
  },
  {
    // Finding 14 (the final 100,000-schedule soak): a handler closed the connection, another
    // drained from inside, and a third began a 35-day retry wait, all in one turn. The close had
    // ended every wait; the drain then put a fresh signal in place for drainable waits, and the
    // retry wait, begun after it, took that one: it was still waiting (its timer set) after the
    // close. Once intake has stopped, a drain no longer renews the signal, so a later wait ends at
    // once and its delivery goes back.
    name: 'finding 14: a retry wait begun after a close and a drain from inside ends at once',
    schedule: {
      seed: 331_201_263,
      queues: [
        queue({
          deliveryLimit: 6,
          idempotent: true,
          claimTimeoutMs: 300_000,
          inProgressDelayMs: 1_000,
          heldTimeoutMs: 1_000,
          consumers: [
            { prefetch: 3, concurrency: 3 },
            { prefetch: 1, concurrency: 3 },
          ],
        }),
      ],
      messages: [
        message([
          ok,
          { kind: 'publish', to: 'sink', afterMs: 2_000 },
          { kind: 'close', drainMs: 50 },
        ]),
        message(
          [
            { kind: 'retry', delayMs: 3_000_000_000 },
            { kind: 'throw' },
            { kind: 'release' },
            { kind: 'close-consumer', drainMs: 10_000 },
          ],
          4_747,
        ),
        message([{ kind: 'drain', timeoutMs: 0 }, ok, ok, ok], 4_170),
        message(
          [
            { kind: 'throw' },
            { kind: 'close-consumer', drainMs: 0 },
            { kind: 'throw' },
            { kind: 'publish', to: 'sink', afterMs: 0 },
          ],
          32_192,
        ),
        message([{ kind: 'drain', timeoutMs: 10_000 }], 0, { foreign: true }),
        message(
          [
            { kind: 'fail-after', ms: 10 },
            { kind: 'publish', to: 'missing-exchange', afterMs: 2_000 },
          ],
          49_941,
        ),
        message([{ kind: 'publish', to: 'sink', afterMs: 0 }], 18_337),
        message([{ kind: 'throw' }, { kind: 'release' }, { kind: 'dead-letter' }], 43_354),
        message([{ kind: 'odd', value: 'dead-letter' }], 39_445),
        message([{ kind: 'close', drainMs: 0 }], 0),
      ],
      events: [
        {
          at: 34_951,
          event: { kind: 'store-fault', op: 'confirm', fault: 'hang', count: 4, delayMs: 1_000 },
        },
        { at: 3_188, event: { kind: 'drain', timeoutMs: 10_000, abortAfterMs: 5_000 } },
        {
          at: 34_459,
          event: { kind: 'store-fault', op: 'any', fault: 'hang', count: 3, delayMs: 5_000 },
        },
        { at: 20_943, event: { kind: 'close-consumer', consumer: 1, drainMs: 50 } },
      ],
      finalDrainMs: 1_000,
    },
  },
  {
    // Finding 15 (a 100,000-schedule soak): a handler closed its own consumer with a long drain
    // and returned; its claim's confirm was slow (the store answered late three times). The
    // consumer's close had already left the connection's list of consumers, waiting only for
    // its handler to settle before closing its channel, so the connection's close, begun while
    // the confirm was still being tried, did not wait for it: it closed the transport under the
    // settling delivery and its ack was lost, well before that close's 10 s drain was up. A
    // consumer closed from inside its own handler stays the connection's until its channel has
    // closed, and the connection's close drains it like any other.
    name: 'finding 15: a connection close waits for a consumer closed from its own handler to settle',
    schedule: schedule(
      [
        queue({
          idempotent: true,
          claimTimeoutMs: 300_000,
          consumers: [{ prefetch: 1, concurrency: 1 }],
        }),
      ],
      [message([{ kind: 'close-consumer', drainMs: 3_000_000_000 }], 100)],
      [
        [50, { kind: 'store-fault', op: 'confirm', fault: 'late', count: 3, delayMs: 5_000 }],
        [1_000, { kind: 'close', drainMs: 10_000 }],
      ],
    ),
    check: allAckedAfterSuccess,
  },
  {
    // Finding 16 (a 100,000-schedule run, seed 1981121811, schedule 94,462): a drain of the
    // connection (35 days) began while one handler ran and another message waited in the buffer;
    // the heal resumed consuming under it. At 10 ms the handler failed and its message began a
    // wait: no handler ran, and the drain answered true, rightly. In the same turn the buffered
    // message started and its handler called a drain of its own, which paused consuming again and
    // woke the wait; by the time the harness saw the first answer, two handlers ran and consuming
    // was paused, and it called the answer early. The engine was right; the check only looked at
    // whether consuming was paused when it saw the answer. It now judges an answer only when no
    // resume came between the drain's start and its answer.
    name: 'finding 16: a drain answers true only once no handler but those waiting inside a drain runs',
    schedule: {
      ...schedule(
        [
          queue({
            type: 'quorum',
            deliveryLimit: 4,
            consumerTimeoutMs: 150_000,
            retry: { kind: 'exponential', attempts: 3, delayMs: 1_000 },
            idempotent: true,
            storeTimeoutMs: 200,
            heldTimeoutMs: 1_000,
            consumers: [{ prefetch: 2, concurrency: 1 }],
          }),
          queue({
            deliveryLimit: 6,
            retry: { kind: 'none', delayMs: 10 },
            claimTimeoutMs: 300_000,
            storeTimeoutMs: 200,
            inProgressDelayMs: 1_000,
            consumers: [{ prefetch: 2, concurrency: 1 }],
          }),
        ],
        [
          message([{ kind: 'drain', timeoutMs: 0 }, ok], 1, { queue: 1, foreign: true }),
          message(
            [
              { kind: 'fail-after', ms: 10 },
              { kind: 'odd', value: 'release' },
            ],
            0,
            {
              queue: 1,
              foreign: true,
            },
          ),
        ],
        [[0, { kind: 'drain', timeoutMs: 3_000_000_000, abortAfterMs: undefined }]],
        0,
      ),
      seed: 275_790_790,
    },
  },
]
