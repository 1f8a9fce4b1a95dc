import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  AceMqError,
  ClosedError,
  ErrorCodes,
  InMemoryOutboxStore,
  InMemoryTransport,
  OutboxRecord,
  OutboxRelay,
  PublishFailedError,
  Topology,
  errorCodeOf,
  type HealthContributor,
  type Instrumentation,
  type OutboxStore,
} from '../../src/index.js'
import type { OutboxRelayHost } from '../../src/outbox/outbox-relay.js'
import {
  blamesRecord,
  isConnectionTrouble,
  seconds,
  storeMaxAttempts,
} from '../../src/outbox/publish-outcome.js'
import type { OutgoingMessage, PublishInfo, PublishScope } from '../../src/spi.js'
import { outboxStoreReplacing } from '@acemq/testing'
import { gatedMarks } from './relay-doubles.js'

// The relay through a host of the test's own: what it refuses, what it tells onError and the
// instrumentation, its health report, and how it tells a record's fault from the connection's.

/** The in-memory broker, with publishes that fail as the test says, by routing key. */
class ScriptedTransport extends InMemoryTransport {
  readonly failing = new Map<string, unknown[]>()
  readonly published: OutgoingMessage[] = []

  override publish(...args: Parameters<InMemoryTransport['publish']>): Promise<void> {
    const [message] = args
    this.published.push(message)
    const queue = this.failing.get(message.routingKey)
    const failure = queue?.shift()
    if (failure !== undefined) return Promise.reject(failure)
    return super.publish(...args)
  }
}

interface Host extends OutboxRelayHost {
  publishingPaused: boolean
  closed: boolean
  instrumentation: Instrumentation | undefined
  readonly reports: { error: unknown; context: string }[]
  readonly contributors: HealthContributor[]
  readonly started: OutboxRelay[]
}

let transport: ScriptedTransport
let host: Host
let now: number

function hostOn(on: ScriptedTransport): Host {
  const reports: Host['reports'] = []
  const contributors: HealthContributor[] = []
  const started: OutboxRelay[] = []
  return {
    transport: on,
    origin: 'orders@test',
    instrumentation: undefined,
    publishingPaused: false,
    closed: false,
    reports,
    contributors,
    started,
    registerHealth: (contributor) => {
      contributors.push(contributor)
      return () => contributors.splice(contributors.indexOf(contributor), 1)
    },
    reportError: (error, context) => reports.push({ error, context }),
    // A set, as the connection keeps them.
    relayStarted: (relay) => {
      if (!started.includes(relay)) started.push(relay)
    },
    relayStopped: (relay) => started.splice(started.indexOf(relay), 1),
  }
}

beforeEach(async () => {
  now = Date.UTC(2030, 0, 1)
  transport = new ScriptedTransport()
  await transport.connect()
  await transport.declare(Topology.define().queue('orders.placed').plan())
  host = hostOn(transport)
})

afterEach(async () => {
  await transport.close()
})

async function storeWith(count: number, options: { maxAttempts?: number } = {}) {
  const store = new InMemoryOutboxStore({ now: () => now, ...options })
  for (let i = 0; i < count; i++) {
    await store.add(OutboxRecord.of('', 'orders.placed', { i }, { id: `o-${i}` }))
  }
  return store
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : '')

describe('the relay refuses', () => {
  it.each(['claimBatch', 'markPublished', 'markFailed', 'stats'] as const)(
    'a store without %s',
    (method) => {
      const store = outboxStoreReplacing(new InMemoryOutboxStore(), {})
      const broken = { ...store, [method]: undefined } as unknown as OutboxStore
      expect(() => new OutboxRelay(host, broken)).toThrow(
        'outbox(store) needs an OutboxStore (claimBatch, markPublished, markFailed, release, stats, ...); got [object Object]',
      )
    },
  )

  it('no store at all', () => {
    expect(() => new OutboxRelay(host, null as unknown as OutboxStore)).toThrow(/got null/)
    expect(() => new OutboxRelay(host, 'store' as unknown as OutboxStore)).toThrow(/got store/)
    expect(() => new OutboxRelay(host, undefined as unknown as OutboxStore)).toThrow(
      'outbox(store) needs an OutboxStore (claimBatch, markPublished, markFailed, release, stats, ...); got undefined',
    )
  })

  it('a batch that is no whole number from 1 to 10000, by name', () => {
    const store = new InMemoryOutboxStore()
    for (const batch of [0, 10_001, 1.5, Number.NaN]) {
      expect(() => new OutboxRelay(host, store, { batch })).toThrow(
        `outbox(options.batch) must be a whole number from 1 to 10000; got ${String(batch)}`,
      )
    }
    expect(new OutboxRelay(host, store, { batch: 1 })).toBeInstanceOf(OutboxRelay)
    expect(new OutboxRelay(host, store, { batch: 10_000 })).toBeInstanceOf(OutboxRelay)
  })

  it('a lease of 0, a maxAttempts that is no whole number, a back-off cap under the back-off, an empty name', () => {
    const store = new InMemoryOutboxStore()
    expect(() => new OutboxRelay(host, store, { lease: 0 })).toThrow(
      'outbox(options.lease) must be longer than 0 ms',
    )
    expect(new OutboxRelay(host, store, { lease: 1 })).toBeInstanceOf(OutboxRelay)
    for (const maxAttempts of [0, 1.5]) {
      expect(() => new OutboxRelay(host, store, { maxAttempts })).toThrow(
        `outbox(options.maxAttempts) must be a whole number of at least 1; got ${maxAttempts}`,
      )
    }
    expect(() => new OutboxRelay(host, store, { retryDelay: '2s', maxRetryDelay: '1s' })).toThrow(
      'outbox(options.maxRetryDelay) must be at least retryDelay (2000 ms); got 1000 ms',
    )
    const same = new OutboxRelay(host, store, { retryDelay: '2s', maxRetryDelay: '2s' })
    expect([same.retryDelayMs, same.maxRetryDelayMs]).toEqual([2_000, 2_000])
    expect(() => new OutboxRelay(host, store, { name: '' })).toThrow(
      'outbox(options.name) must be a non-empty string',
    )
    expect(() => new OutboxRelay(host, store, { name: 3 as unknown as string })).toThrow(
      /options.name/,
    )
    expect(() => new OutboxRelay(host, store, { poll: -1 })).toThrow(/outbox\(options.poll\)/)
    expect(() => new OutboxRelay(host, store, { lease: -1 })).toThrow(/outbox\(options.lease\)/)
    expect(() => new OutboxRelay(host, store, { lagThreshold: -1 })).toThrow(
      /outbox\(options.lagThreshold\)/,
    )
    expect(() => new OutboxRelay(host, store, { retryDelay: -1 })).toThrow(
      /outbox\(options.retryDelay\)/,
    )
    expect(() => new OutboxRelay(host, store, { maxRetryDelay: -1 })).toThrow(
      /outbox\(options.maxRetryDelay\)/,
    )
  })

  it('to start or drain on a closed connection', async () => {
    const relay = new OutboxRelay(host, new InMemoryOutboxStore())
    host.closed = true
    expect(() => relay.start()).toThrow(ClosedError)
    await expect(relay.drainOnce()).rejects.toBeInstanceOf(ClosedError)
    expect(host.contributors).toEqual([])
    expect(host.started).toEqual([])
  })
})

describe('a relay started and stopped', () => {
  it('registers its health and itself once, and takes both back once stopped', async () => {
    const relay = new OutboxRelay(host, new InMemoryOutboxStore(), { poll: '1h', name: 'audit' })
    expect(relay.isRunning).toBe(false)
    relay.start()
    relay.start()
    expect(relay.isRunning).toBe(true)
    expect(host.contributors.map((c) => c.name)).toEqual(['audit'])
    expect(host.started).toEqual([relay])
    await relay.stop()
    expect(relay.isRunning).toBe(false)
    expect(host.contributors).toEqual([])
    expect(host.started).toEqual([])
    await relay.stop()
    // Started again after a stop.
    relay.start()
    expect(relay.isRunning).toBe(true)
    expect(host.started).toEqual([relay])
    await relay.stop()
  })

  it('is not running while it stops, and a start meanwhile runs on once the stop is done', async () => {
    const relay = new OutboxRelay(host, new InMemoryOutboxStore(), { poll: '1h' })
    relay.start()
    const stopping = relay.stop()
    expect(relay.isRunning).toBe(false)
    relay.start()
    expect(relay.isRunning).toBe(true)
    await stopping
    // The stop was the first run's: the second keeps its health report and its place.
    expect(relay.isRunning).toBe(true)
    expect(host.contributors).toHaveLength(1)
    expect(host.started).toEqual([relay])
    await relay.stop()
    expect(host.contributors).toEqual([])
    expect(host.started).toEqual([])
  })

  it('waits in stop() for a drain under way to mark what it published', async () => {
    const inner = await storeWith(1)
    const gated = gatedMarks(inner)
    const relay = new OutboxRelay(host, gated.store)
    const draining = relay.drainOnce()
    while (!gated.marking()) await new Promise((resolve) => setImmediate(resolve))
    let stopped = false
    const stopping = relay.stop().then(() => (stopped = true))
    await new Promise((resolve) => setImmediate(resolve))
    expect(stopped).toBe(false)
    gated.open()
    await stopping
    expect(await inner.pendingCount()).toBe(0)
    expect(await draining).toBe(1)
  })

  it('relays nothing while publishing is paused or the connection is down, and says why a round failed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const store = await storeWith(1)
      const failure = new Error('database gone')
      let claims = 0
      const counting = outboxStoreReplacing(store, {
        claimBatch: (batch, lease) => {
          claims++
          return claims === 2 ? Promise.reject(failure) : store.claimBatch(batch, lease)
        },
      })
      const relay = new OutboxRelay(host, counting, { poll: 100 })
      host.publishingPaused = true
      relay.start()
      await vi.advanceTimersByTimeAsync(250)
      expect(claims).toBe(0)
      host.publishingPaused = false
      transport.block()
      await vi.advanceTimersByTimeAsync(100)
      // Blocked is still open: the round runs, and hands the record back.
      expect(claims).toBe(1)
      transport.unblock()
      await vi.advanceTimersByTimeAsync(100)
      expect(claims).toBe(2)
      expect(host.reports.at(-1)).toEqual({
        error: failure,
        context: 'the outbox relay could not finish a round; it tries again',
      })
      await vi.advanceTimersByTimeAsync(100)
      expect(claims).toBe(3)
      expect(relay.published).toBe(1)
      await relay.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  it('claims the next batch at once while batches come back full, then waits a poll', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const store = await storeWith(5)
      const claimed: number[] = []
      const counting = outboxStoreReplacing(store, {
        claimBatch: async (batch, lease) => {
          const records = await store.claimBatch(batch, lease)
          claimed.push(records.length)
          return records
        },
      })
      const relay = new OutboxRelay(host, counting, { poll: 1_000, batch: 2 })
      relay.start()
      await vi.advanceTimersByTimeAsync(0)
      expect(claimed).toEqual([2, 2, 1])
      await vi.advanceTimersByTimeAsync(999)
      expect(claimed).toEqual([2, 2, 1])
      await vi.advanceTimersByTimeAsync(1)
      expect(claimed).toEqual([2, 2, 1, 0])
      await relay.stop()
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('a relay round', () => {
  it('publishes each record persistent and mandatory, with its content type, id and first-seen time', async () => {
    const store = new InMemoryOutboxStore({ now: () => now })
    await store.add(
      OutboxRecord.of('', 'orders.placed', 'hi', {
        id: 'r-1',
        contentType: 'text/plain',
        type: 'order.placed',
      }),
    )
    expect(await new OutboxRelay(host, store).drainOnce()).toBe(1)
    const [message] = transport.published
    expect(message).toMatchObject({
      exchange: '',
      routingKey: 'orders.placed',
      persistent: true,
      mandatory: true,
      properties: { contentType: 'text/plain', messageId: 'r-1' },
    })
    expect(message?.headers['x-acemq-id']).toBe('r-1')
    expect(message?.headers['x-acemq-type']).toBe('order.placed')
    expect(message?.headers['x-acemq-origin']).toBe('orders@test')
  })

  it('tells the instrumentation of each publish, its outcome, and each record relayed with its lag', async () => {
    const started: PublishInfo[] = []
    const ended: [string, unknown][] = []
    const relayed: unknown[] = []
    host.instrumentation = {
      publishStarted: (info): PublishScope => {
        started.push(info)
        return { end: (outcome, error) => ended.push([outcome, error]) }
      },
      processStarted: () => undefined,
      outboxRelayed: (info) => relayed.push(info),
    }
    const store = new InMemoryOutboxStore({ now: () => now })
    await store.add(OutboxRecord.of('', 'orders.placed', {}, { id: 'r-1', correlation: 'c-1' }))
    await store.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-2' }))
    now = Date.now() - 1_500
    await store.add(OutboxRecord.of('', 'orders.placed', {}, { id: 'r-3' }))
    now = Date.now() + 60_000
    const relay = new OutboxRelay(host, store, { retryDelay: 0 })
    await relay.drainOnce()
    expect(started.map((s) => [s.exchange, s.routingKey, s.messageId, s.correlation])).toEqual([
      ['', 'orders.placed', 'r-1', 'c-1'],
      ['', 'nowhere', 'r-2', 'r-2'],
      ['', 'orders.placed', 'r-3', 'r-3'],
    ])
    expect(started[0]?.headers['x-acemq-id']).toBe('r-1')
    expect(ended.map(([outcome]) => outcome)).toEqual(['confirmed', 'failed', 'confirmed'])
    expect(errorCodeOf(ended[1]?.[1])).toBe(ErrorCodes.UNROUTABLE)
    expect(relayed).toContainEqual({
      exchange: '',
      routingKey: 'nowhere',
      outcome: 'failed',
      lagMs: expect.any(Number),
    })
    const lags = (relayed as { routingKey: string; lagMs: number; outcome: string }[]).map((r) => [
      r.routingKey,
      r.outcome,
      r.lagMs,
    ])
    // A record stamped in the future has lag 0, not a negative one.
    expect(lags.filter(([key]) => key === 'orders.placed')).toContainEqual([
      'orders.placed',
      'published',
      0,
    ])
    const third = lags.find(([key, , lag]) => key === 'orders.placed' && (lag as number) > 0)
    expect(third?.[2]).toBeGreaterThanOrEqual(1_500)
  })

  it('refuses every publish while publishing is paused, and tells the instrumentation so', async () => {
    const ended: string[] = []
    host.instrumentation = {
      publishStarted: () => ({ end: (outcome) => ended.push(outcome) }),
      processStarted: () => undefined,
    }
    const store = await storeWith(2, { maxAttempts: 1 })
    const relay = new OutboxRelay(host, store)
    host.publishingPaused = true
    await expect(relay.drainOnce()).rejects.toThrow(
      /^the outbox relay could not publish: publishing is paused/,
    )
    expect(ended).toEqual(['refused', 'refused'])
    expect(transport.published).toEqual([])
    expect(await store.retired()).toEqual([])
    host.publishingPaused = false
    expect(await relay.drainOnce()).toBe(2)
  })

  it('says why it could not publish when the connection is closed', async () => {
    const relay = new OutboxRelay(host, await storeWith(1))
    await transport.close()
    const error = await relay.drainOnce().catch((e: unknown) => e)
    expect(messageOf(error)).toBe(
      'the outbox relay could not publish: the in-memory transport is closed: the message was not sent',
    )
    expect(errorCodeOf(error)).toBe(ErrorCodes.CLOSED)
  })

  it('charges a record the broker refused, with the back-off it has earned, and says when it is offered again', async () => {
    const store = await storeWith(0, { maxAttempts: 3 })
    await store.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-1' }))
    const relay = new OutboxRelay(host, store, { retryDelay: 1_500, maxRetryDelay: 4_000 })
    await relay.drainOnce()
    expect(host.reports.map((r) => r.context)).toEqual([
      "the outbox relay could not publish outbox record 'r-1' (failed attempt 1 of 3); it is offered again in 1500 ms",
    ])
    now += 1_499
    await relay.drainOnce()
    expect(relay.failed).toBe(1)
    now += 1
    await relay.drainOnce()
    expect(host.reports.at(-1)?.context).toBe(
      "the outbox relay could not publish outbox record 'r-1' (failed attempt 2 of 3); it is offered again in 3 s",
    )
    now += 3_000
    await relay.drainOnce()
    expect(relay.failed).toBe(3)
    const retirement = host.reports.at(-1)
    expect(retirement?.context).toBe('the outbox relay retired a record')
    expect(messageOf(retirement?.error)).toBe(
      "outbox record 'r-1' was retired after 3 failed publishes (exchange '', routing key 'nowhere') and is offered no more until it is re-offered (store.reoffer() or `acemq outbox reoffer`): the broker could not route the message: exchange '(default)', routing key 'nowhere' (NO_ROUTE)",
    )
    expect((retirement?.error as Error).cause).toMatchObject({ code: ErrorCodes.UNROUTABLE })
    const [retired] = await store.retired()
    expect(retired?.lastError).toMatch(/NO_ROUTE/)
  })

  it('caps the back-off, and leaves out the limit when neither relay nor store says one', async () => {
    const inner = await storeWith(0)
    await inner.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-1' }))
    const failOptions: unknown[] = []
    const store = outboxStoreReplacing(inner, {
      markFailed: (id, reason, options) => {
        failOptions.push(options)
        return inner.markFailed(id, reason, options)
      },
    })
    const relay = new OutboxRelay(host, store, { retryDelay: 1_000, maxRetryDelay: 2_500 })
    for (let i = 0; i < 3; i++) {
      await relay.drainOnce()
      now += 10_000
    }
    expect(failOptions.map((o) => (o as { retryInMs: number }).retryInMs)).toEqual([
      1_000, 2_000, 2_500,
    ])
    expect(failOptions[0]).toEqual({ retryInMs: 1_000, lease: expect.any(String) })
    expect(host.reports[0]?.context).toMatch(/\(failed attempt 1\); it is offered again in 1 s$/)
    expect(storeMaxAttempts(store)).toBeUndefined()
    const limited = new OutboxRelay(host, store, { maxAttempts: 7, name: 'b' })
    await limited.drainOnce()
    expect(failOptions.at(-1)).toMatchObject({ maxAttempts: 7 })
    expect(host.reports.at(-1)?.context).toMatch(/\(failed attempt 4 of 7\)/)
  })

  it('sends no lease with a record that has none, and a back-off of many failures stays finite', async () => {
    const inner = await storeWith(0)
    await inner.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-1' }))
    const failOptions: Record<string, unknown>[] = []
    const released: unknown[][] = []
    const store = outboxStoreReplacing(inner, {
      claimBatch: async (batch, lease) =>
        (await inner.claimBatch(batch, lease)).map(({ lease: _l, ...r }) => ({
          ...r,
          attempts: 2_000,
        })),
      markFailed: (id, reason, options) => {
        failOptions.push({ ...(options as object) })
        return Promise.resolve('pending')
      },
      release: async (...args) => {
        released.push(args)
      },
    })
    const relay = new OutboxRelay(host, store, { retryDelay: 1, maxRetryDelay: '1h' })
    await relay.drainOnce()
    expect(failOptions).toStrictEqual([{ retryInMs: 3_600_000 }])
    expect(host.reports[0]?.context).toMatch(/failed attempt 2001\b/)
    await inner.add(OutboxRecord.of('', 'orders.placed', {}, { id: 'r-2' }))
    transport.block()
    await relay.drainOnce().catch(() => undefined)
    expect(released).toEqual([[['r-2']]])
  })

  it('marks nothing published when no publish of the batch was confirmed', async () => {
    const inner = await storeWith(0)
    await inner.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-1' }))
    const marked: unknown[] = []
    const store = outboxStoreReplacing(inner, {
      markPublished: async (ids) => {
        marked.push(ids)
        await inner.markPublished(ids)
      },
    })
    expect(await new OutboxRelay(host, store).drainOnce()).toBe(0)
    expect(marked).toEqual([])
  })

  it('charges nothing when the lease had lapsed, and says so', async () => {
    const inner = await storeWith(0)
    await inner.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-1' }))
    const store = outboxStoreReplacing(inner, { markFailed: async () => 'lapsed' })
    const relay = new OutboxRelay(host, store)
    await relay.drainOnce()
    expect(relay.failed).toBe(0)
    expect(host.reports.map((r) => r.context)).toEqual([
      "the outbox relay could not publish outbox record 'r-1', but its lease had lapsed and another relay holds it: nothing was charged",
    ])
  })

  it('publishes a record once more on a fresh channel before it charges a failure that blames no record', async () => {
    const store = await storeWith(2, { maxAttempts: 1 })
    const closed = new PublishFailedError('the channel closed before the broker confirmed')
    transport.failing.set('orders.placed', [closed, closed])
    const relay = new OutboxRelay(host, store)
    expect(await relay.drainOnce()).toBe(2)
    expect(relay.failed).toBe(0)
    expect(transport.published).toHaveLength(4)
    // Failing again on the second pass: charged.
    await store.add(OutboxRecord.of('', 'orders.placed', {}, { id: 'r-3' }))
    transport.failing.set('orders.placed', [closed, closed])
    expect(await relay.drainOnce()).toBe(0)
    expect(relay.failed).toBe(1)
    expect(transport.published).toHaveLength(6)
    // A failure that blames its record is charged at once.
    await store.add(OutboxRecord.of('', 'orders.placed', {}, { id: 'r-4' }))
    transport.failing.set('orders.placed', [
      new AceMqError('no exchange', { code: ErrorCodes.EXCHANGE_NOT_FOUND }),
    ])
    expect(await relay.drainOnce()).toBe(0)
    expect(relay.failed).toBe(2)
    expect(transport.published).toHaveLength(7)
  })

  it('hands a claimed-ahead batch back when the round stalls, and says when that fails', async () => {
    const inner = await storeWith(4)
    const released: string[][] = []
    const leases: unknown[] = []
    let failRelease = false
    const store = outboxStoreReplacing(inner, {
      release: async (ids, lease) => {
        if (failRelease) throw new Error('release failed')
        released.push([...ids])
        leases.push(lease)
        return inner.release(ids, lease)
      },
    })
    transport.block()
    const relay = new OutboxRelay(host, store, { batch: 2 })
    await expect(relay.drainOnce()).rejects.toThrow(/blocked/)
    expect(released.sort()).toEqual([
      ['o-0', 'o-1'],
      ['o-2', 'o-3'],
    ])
    // Handed back under each claim's lease token.
    expect(leases).toEqual([expect.any(String), expect.any(String)])
    expect(await inner.pendingCount()).toBe(4)
    failRelease = true
    // The batch in flight's release fails the round; the one claimed ahead is said to.
    await expect(relay.drainOnce()).rejects.toThrow('release failed')
    expect(host.reports.map((r) => r.context)).toContain(
      'the outbox relay could not hand back a batch it claimed; its lease runs out on its own',
    )
  })

  it('says a claim ahead failed while the round stalls', async () => {
    const inner = await storeWith(4)
    let claims = 0
    const store = outboxStoreReplacing(inner, {
      claimBatch: (batch, lease) =>
        ++claims === 2 ? Promise.reject(new Error('claim failed')) : inner.claimBatch(batch, lease),
    })
    transport.block()
    const relay = new OutboxRelay(host, store, { batch: 2 })
    await expect(relay.drainOnce()).rejects.toThrow(/blocked/)
    expect(host.reports).toEqual([
      {
        error: new Error('claim failed'),
        context: 'the outbox relay could not claim its next batch',
      },
    ])
  })

  it('hands back an empty batch claimed ahead without a release', async () => {
    const inner = await storeWith(2)
    let released = 0
    const store = outboxStoreReplacing(inner, {
      release: async (ids, lease) => {
        released++
        return inner.release(ids, lease)
      },
    })
    transport.block()
    await expect(new OutboxRelay(host, store, { batch: 2 }).drainOnce()).rejects.toThrow()
    // The batch in flight, handed back; the one claimed ahead was empty.
    expect(released).toBe(1)
    expect(host.reports).toEqual([])
  })
})

describe('the relay’s health report', () => {
  it('says what it did, what is pending and retired, how late, and its last error', async () => {
    const store = await storeWith(1, { maxAttempts: 1 })
    await store.add(OutboxRecord.of('', 'nowhere', {}, { id: 'r-x' }))
    const relay = new OutboxRelay(host, store, { lagThreshold: '1m', poll: '1h' })
    relay.start()
    await relay.stop()
    relay.start()
    const [contributor] = host.contributors
    await relay.drainOnce()
    const report = await contributor?.report()
    expect(report).toEqual({
      name: 'outbox',
      status: 'DEGRADED',
      details: {
        running: 'true',
        published: '1',
        failed: '1',
        pending: '0',
        retired: '1',
        lagSeconds: '0',
        lastError:
          "the broker could not route the message: exchange '(default)', routing key 'nowhere' (NO_ROUTE)",
      },
    })
    await relay.stop()
  })

  it('is UP with a lag at the threshold, DEGRADED past it, and DEGRADED with the error when the store is out of reach', async () => {
    const store = await storeWith(0)
    let failing = false
    const inner = outboxStoreReplacing(store, {
      stats: () => (failing ? Promise.reject(new Error('database gone')) : store.stats()),
    })
    const relay = new OutboxRelay(host, inner, { lagThreshold: '1m', poll: '1h' })
    relay.start()
    const [contributor] = host.contributors
    expect((await contributor?.report())?.status).toBe('UP')
    await store.add(OutboxRecord.of('', 'orders.placed', {}))
    now += 60_000
    expect(await contributor?.report()).toMatchObject({
      status: 'UP',
      details: { lagSeconds: '60', pending: '1' },
    })
    now += 1
    expect(await contributor?.report()).toMatchObject({
      status: 'DEGRADED',
      details: { lagSeconds: '60' },
    })
    now += 999
    expect((await contributor?.report())?.details['lagSeconds']).toBe('61')
    failing = true
    expect(await contributor?.report()).toEqual({
      name: 'outbox',
      status: 'DEGRADED',
      details: { running: 'true', published: '0', failed: '0', error: 'database gone' },
    })
    await relay.stop()
  })

  it('counts no lag for a pending record stamped after the store’s now', async () => {
    const store = await storeWith(0)
    const inner = outboxStoreReplacing(store, {
      stats: async () => ({ ...(await store.stats()), pending: 1, oldestPendingAt: now + 5_000 }),
    })
    const relay = new OutboxRelay(host, inner, { lagThreshold: 0, poll: '1h' })
    relay.start()
    expect(await host.contributors[0]?.report()).toMatchObject({
      status: 'UP',
      details: { lagSeconds: '0' },
    })
    await relay.stop()
  })
})

describe('what a failed publish blames', () => {
  it('blames the record for no route, no exchange, or a body it cannot encode, and nothing else', () => {
    for (const code of [
      ErrorCodes.UNROUTABLE,
      ErrorCodes.EXCHANGE_NOT_FOUND,
      ErrorCodes.UNENCODABLE,
    ]) {
      expect(blamesRecord(new AceMqError('x', { code }))).toBe(true)
    }
    expect(blamesRecord(new AceMqError('x', { code: ErrorCodes.PUBLISH_FAILED }))).toBe(false)
    expect(blamesRecord(new Error('x'))).toBe(false)
  })

  it('calls blocked, paused, closed, an abort or a connection not open the connection’s trouble', async () => {
    for (const code of [
      ErrorCodes.CONNECTION_BLOCKED,
      ErrorCodes.PUBLISHING_PAUSED,
      ErrorCodes.CLOSED,
    ]) {
      expect(isConnectionTrouble(new AceMqError('x', { code }), transport)).toBe(true)
    }
    expect(isConnectionTrouble(new DOMException('aborted', 'AbortError'), transport)).toBe(true)
    expect(isConnectionTrouble(new Error('nack'), transport)).toBe(false)
    expect(isConnectionTrouble('nack', transport)).toBe(false)
    const down = new InMemoryTransport()
    expect(isConnectionTrouble(new Error('nack'), down)).toBe(true)
    const closedButOpen = { state: { open: true, closed: true } } as unknown as InMemoryTransport
    expect(isConnectionTrouble(new Error('nack'), closedButOpen)).toBe(true)
  })

  it('reads a store’s own maxAttempts only when it is a number, and writes whole seconds as seconds', () => {
    expect(storeMaxAttempts(new InMemoryOutboxStore({ maxAttempts: 4 }))).toBe(4)
    expect(storeMaxAttempts({ maxAttempts: '4' } as unknown as OutboxStore)).toBeUndefined()
    expect(seconds(0)).toBe('0 s')
    expect(seconds(61_000)).toBe('61 s')
    expect(seconds(1_001)).toBe('1001 ms')
  })
})
