import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  Ack,
  AceMq,
  AceMqError,
  ConsumerOptions,
  ErrorCodes,
  FatalError,
  InMemoryIdempotencyStore,
  RetryPolicy,
  Topology,
  type Handler,
  type Instrumentation,
} from '../../src/index.js'
import {
  MAX_ID_BYTES,
  readEnvelope,
  type ClaimingIdempotencyStore,
  type OutgoingMessage,
  type ProcessInfo,
} from '../../src/spi.js'
import { closeOnFakeClock, run, settled, useFakeClock } from './fake-clock.js'
import { ManualDelivery, ManualTransport } from './manual-transport.js'

// What the consumer does after the handler: the copies it writes (retries, put-backs,
// dead-letters, parks) and what it does when one cannot be written, what it tells telemetry,
// and how drains, closes and lost channels end its waits. Deliveries are made by hand, the
// copies go to the in-memory broker, the clock (and `performance`, for handler durations) is
// fake.

/** One consumer-side process scope's calls, in order. */
type Call = [string, ...unknown[]]

describe('the consumer’s copies, waits and telemetry (fake clock)', () => {
  let transport: ManualTransport
  let mq: AceMq
  let reported: [string, unknown][]
  let scopes: { info: ProcessInfo; calls: Call[] }[]
  let rungsMissing: [string, string][]
  /** The id of the message whose scope's run() is on the stack. */
  let insideRun: string | undefined

  const instrumentation: Instrumentation = {
    publishStarted: () => undefined,
    processStarted: (info) => {
      const calls: Call[] = []
      scopes.push({ info, calls })
      return {
        run: (fn) => {
          calls.push(['run'])
          insideRun = info.messageId
          try {
            return fn()
          } finally {
            insideRun = undefined
          }
        },
        handled: (durationMs, error) =>
          calls.push(['handled', durationMs, error === undefined ? undefined : String(error)]),
        retried: (delayMs, inBroker) => calls.push(['retried', delayMs, inBroker]),
        setAside: (outcome, queue, reason) => calls.push(['setAside', outcome, queue, reason]),
        end: (outcome, error) =>
          calls.push(error === undefined ? ['end', outcome] : ['end', outcome, String(error)]),
      }
    },
    rungMissing: (queue, rung) => rungsMissing.push([queue, rung]),
  }

  beforeEach(async () => {
    useFakeClock({ performance: true })
    transport = new ManualTransport()
    reported = []
    scopes = []
    rungsMissing = []
    insideRun = undefined
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([context, error]),
    })
    mq.setInstrumentation(instrumentation)
    await mq.applyTopology(Topology.define().queueWithDeadLetter('q'))
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  /** Consumes `q` with `handler`; deliveries are handed over with {@link deliver}. */
  async function consume(options: ConsumerOptions, handler: Handler<unknown>): Promise<void> {
    await mq.consume('q', options, handler)
  }

  function deliver(id: string, options: { settleable?: boolean } = {}): ManualDelivery {
    return transport.current.deliver(new ManualDelivery(id, options))
  }

  function callsOf(id: string): Call[] {
    return scopes.filter((s) => s.info.messageId === id).flatMap((s) => s.calls)
  }

  /** The messages on `queue` (taken off it): id, attempt, reason. */
  function takeAll(queue: string): { id: string; attempt: number; error: string | undefined }[] {
    const taken = []
    for (;;) {
      const message = transport.get(queue)
      if (message === undefined) return taken
      const { envelope } = readEnvelope(message.headers, {
        messageId: message.properties.messageId,
        routingKey: queue,
      })
      taken.push({ id: envelope.id, attempt: envelope.attempt, error: envelope.error })
    }
  }

  function publishesTo(queue: string): OutgoingMessage[] {
    return transport.published.filter((p) => p.message.routingKey === queue).map((p) => p.message)
  }

  /** Publishes to `queue` fail with each of `failures` in turn, then go through. */
  function failPublishes(queue: string, ...failures: Error[]): void {
    transport.beforePublish = (message) => {
      if (message.routingKey !== queue) return
      const failure = failures.shift()
      if (failure !== undefined) throw failure
    }
  }

  async function consumersDetails(): Promise<Record<string, string>> {
    const health = await mq.health()
    const report = health.reports.find((r) => r.name === 'consumers')
    return { status: report?.status ?? 'none', ...report?.details }
  }

  describe('telemetry', () => {
    it('runs the handler inside the scope and reports how long it took, then the outcome', async () => {
      await run(10_000)
      const seenInside: (string | undefined)[] = []
      await consume(ConsumerOptions.defaults(), async (message) => {
        seenInside.push(insideRun)
        await new Promise((resolve) => setTimeout(resolve, 1_500))
        if (message.envelope.id === 'poison') throw new FatalError('poison')
      })
      const good = deliver('good')
      await run(1_500)
      expect(good.settlements).toEqual(['ack'])
      expect(callsOf('good')).toEqual([['run'], ['handled', 1_500, undefined], ['end', 'acked']])
      deliver('poison')
      await run(1_500)
      expect(callsOf('poison')).toEqual([
        ['run'],
        ['handled', 1_500, 'FatalError: poison'],
        ['setAside', 'rejected', 'q.dlq', 'poison'],
        ['end', 'rejected'],
      ])
      expect(seenInside).toEqual(['good', 'poison'])
    })

    it('reports a synchronous handler that throws with the time it took', async () => {
      await run(10_000)
      await consume(ConsumerOptions.defaults(), () => {
        vi.advanceTimersByTime(40)
        throw new FatalError('at once')
      })
      deliver('sync')
      await run()
      expect(callsOf('sync').slice(0, 2)).toEqual([['run'], ['handled', 40, 'FatalError: at once']])
    })

    it('reports a retry in the consumer with its delay, and one through a rung as in the broker', async () => {
      await consume(ConsumerOptions.defaults(), () => Ack.retry('busy', '2s'))
      const local = deliver('local')
      await run(1_999)
      expect(local.settlements).toEqual([])
      await run(1)
      expect(local.settlements).toEqual(['ack'])
      expect(takeAll('q')).toEqual([{ id: 'local', attempt: 2, error: undefined }])
      expect(callsOf('local').slice(2)).toEqual([
        ['retried', 2_000, false],
        ['end', 'retried'],
      ])
    })

    it('moves a retry that waits in the broker to its rung at once, and reports it as in the broker', async () => {
      const policy = RetryPolicy.fixed(3, '30s')
      await mq.applyTopology(Topology.define().queueWithRetry('r', policy))
      await mq.consume('r', ConsumerOptions.defaults().withRetry(policy), () => {
        throw new Error('busy')
      })
      const delivery = transport.current.deliver(new ManualDelivery('rung', { queue: 'r' }))
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('r.retry.30s')).toEqual([{ id: 'rung', attempt: 2, error: undefined }])
      expect(callsOf('rung').slice(2)).toEqual([
        ['retried', 30_000, true],
        ['end', 'retried'],
      ])
    })

    it('dead-letters when a policy gives up without a reason, saying after how many attempts', async () => {
      const stops = Object.assign(Object.create(RetryPolicy.prototype) as RetryPolicy, {
        nextWait: () => null,
        giveUpReason: () => undefined,
      })
      await consume(ConsumerOptions.defaults().withRetry(stops), () => Ack.retry('busy'))
      deliver('stop')
      await run()
      expect(takeAll('q.dlq')).toEqual([
        { id: 'stop', attempt: 1, error: 'gave up after 1 attempt(s): busy' },
      ])
      expect(callsOf('stop').slice(2)).toEqual([
        ['setAside', 'dead_lettered', 'q.dlq', 'gave up after 1 attempt(s): busy'],
        ['end', 'dead_lettered'],
      ])
    })

    it('tells that a rung is missing when a copy to it does not route, and only then', async () => {
      const policy = RetryPolicy.fixed(3, '30s')
      await mq.applyTopology(Topology.define().queueWithRetry('r', policy))
      await mq.consume('r', ConsumerOptions.defaults().withRetry(policy), (message) => {
        if (message.envelope.id === 'poison') throw new FatalError('poison')
        throw new Error('busy')
      })
      transport.deleteQueue('r.dlq')
      transport.current.deliver(new ManualDelivery('poison', { queue: 'r' }))
      await run(1)
      expect(takeAll('r.dlq').map((m) => m.id)).toEqual(['poison'])
      expect(rungsMissing).toEqual([])
      transport.deleteQueue('r.retry.30s')
      transport.current.deliver(new ManualDelivery('busy', { queue: 'r' }))
      await run(1)
      expect(rungsMissing).toEqual([['r', 'r.retry.30s']])
      expect(takeAll('r.retry.30s').map((m) => m.id)).toEqual(['busy'])
    })
  })

  describe('a copy that cannot be written', () => {
    it('is tried again after 1 s, then 2 s, each failure reported as it came, and health names the queue meanwhile', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      failPublishes('q.dlq', new Error('first failure'), new Error('second failure'))
      const delivery = deliver('m-1')
      await run()
      expect(reported.map(([context, error]) => [context, String(error)])).toEqual([
        [
          "could not move message m-1 to 'q.dlq' (try 1); it is held and tried again",
          'Error: first failure',
        ],
      ])
      expect(mq.waiting).toBe(1)
      expect(mq.inFlight).toBe(0)
      expect(await consumersDetails()).toMatchObject({
        status: 'DEGRADED',
        failingMoves: 'q -> q.dlq',
      })
      await run(999)
      expect(reported).toHaveLength(1)
      await run(1)
      expect(reported.map(([, error]) => String(error))).toEqual([
        'Error: first failure',
        'Error: second failure',
      ])
      await run(1_999)
      expect(delivery.settlements).toEqual([])
      await run(1)
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('q.dlq')).toEqual([{ id: 'm-1', attempt: 1, error: 'poison' }])
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
      expect(mq.waiting).toBe(0)
    })

    it('keeps the queue in health while any of several copies to it is still held', async () => {
      await consume(ConsumerOptions.defaults().withConcurrency(2), () => {
        throw new FatalError('poison')
      })
      const failing = new Set(['a', 'b'])
      transport.beforePublish = (message) => {
        if (message.routingKey === 'q.dlq' && failing.has(String(message.properties.messageId)))
          throw new Error('not now')
      }
      const a = deliver('a')
      const b = deliver('b')
      await run()
      expect(mq.waiting).toBe(2)
      failing.delete('a')
      await run(1_000)
      expect(a.settlements).toEqual(['ack'])
      expect(b.settlements).toEqual([])
      expect(await consumersDetails()).toMatchObject({
        status: 'DEGRADED',
        failingMoves: 'q -> q.dlq',
      })
      failing.delete('b')
      await run(2_000)
      expect(b.settlements).toEqual(['ack'])
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
    })

    it('held is handed back when the consumer closes, counted as running from the moment the close begins', async () => {
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      failPublishes('q.dlq', new Error('down'), new Error('down'), new Error('down'))
      const delivery = deliver('m-1')
      await run()
      expect(mq.waiting).toBe(1)
      const closing = consumer.close()
      expect(mq.waiting).toBe(0)
      expect(mq.inFlight).toBe(1)
      await run()
      expect(await settled(closing)).toBe(true)
      expect(delivery.settlements).toEqual(['requeue'])
      expect(mq.inFlight).toBe(0)
      expect(takeAll('q.dlq')).toEqual([])
    })

    it('held is not handed back by a drain: it is no handler, and a drain does not end its wait', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      failPublishes('q.dlq', new Error('down'))
      const delivery = deliver('m-1')
      await run()
      await expect(mq.drainConsumers('10s')).resolves.toBe(true)
      expect(delivery.settlements).toEqual([])
      expect(mq.waiting).toBe(1)
      await run(1_000)
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('q.dlq').map((m) => m.id)).toEqual(['m-1'])
    })

    it('that the broker refuses as misconfigured is parked with the reason, not tried again', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      failPublishes(
        'q.dlq',
        new AceMqError('the queue is misconfigured', { code: ErrorCodes.CONFIGURATION }),
      )
      const delivery = deliver('m-1')
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('q.parked')).toEqual([
        {
          id: 'm-1',
          attempt: 1,
          error:
            "could not republish to 'q.dlq' as it is (the queue is misconfigured); its application headers were dropped: poison",
        },
      ])
      // Not tried again, so no failure is reported: only where the message landed.
      expect(reported.map(([context]) => context)).toEqual([
        "message m-1 from 'q' was moved to 'q.parked' (parked)",
      ])
    })

    it('and whose parked copy fails too is held, reporting the parked copy’s failure', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      transport.beforePublish = (message) => {
        if (message.routingKey === 'q.dlq' && transport.published.length <= 1)
          throw new AceMqError('a header cannot be encoded', { code: ErrorCodes.UNENCODABLE })
        if (message.routingKey === 'q.parked') throw new Error('parked queue down')
      }
      const delivery = deliver('m-1')
      await run()
      expect(reported.map(([context, error]) => [context, String(error)])).toEqual([
        [
          "could not move message m-1 to 'q.dlq' (try 1); it is held and tried again",
          'Error: parked queue down',
        ],
      ])
      await run(1_000)
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('q.dlq').map((m) => m.id)).toEqual(['m-1'])
    })
  })

  describe('a delivery the close gave up on', () => {
    it('gets no ack when its copy lands afterwards', async () => {
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      let land!: () => void
      const landing = new Promise<void>((resolve) => (land = resolve))
      transport.beforePublish = (message) => (message.routingKey === 'q.dlq' ? landing : undefined)
      const delivery = deliver('m-1')
      await run()
      const closing = consumer.close({ drainTimeout: 0 })
      await run(5_000)
      expect(await settled(closing)).toBe(true)
      land()
      await run()
      expect(delivery.settlements).toEqual([])
      expect(takeAll('q.dlq').map((m) => m.id)).toEqual(['m-1'])
    })

    it('gets no ack when its copy, tried again, lands afterwards', async () => {
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      let land!: () => void
      const landing = new Promise<void>((resolve) => (land = resolve))
      let tries = 0
      transport.beforePublish = (message) => {
        if (message.routingKey !== 'q.dlq') return undefined
        if (++tries === 1) throw new Error('not now')
        return landing
      }
      const delivery = deliver('m-1')
      await run(1_000)
      expect(tries).toBe(2)
      const closing = consumer.close({ drainTimeout: 0 })
      await run(5_000)
      expect(await settled(closing)).toBe(true)
      land()
      await run()
      expect(delivery.settlements).toEqual([])
      expect(takeAll('q.dlq').map((m) => m.id)).toEqual(['m-1'])
    })

    it('is not handed back when the close gave up on it while its destination was being declared again', async () => {
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      failPublishes('q.dlq', new AceMqError('no route', { code: ErrorCodes.UNROUTABLE }))
      let declared!: () => void
      transport.declareGate = new Promise<void>((resolve) => (declared = resolve))
      const delivery = deliver('m-1')
      await run()
      expect(reported.map(([context]) => context)).toEqual([
        "could not move message m-1 to 'q.dlq' (try 1); it is held and tried again",
      ])
      const closing = consumer.close({ drainTimeout: 0 })
      await run(5_000)
      expect(await settled(closing)).toBe(true)
      declared()
      await run(60_000)
      expect(delivery.settlements).toEqual([])
      expect(publishesTo('q.dlq')).toHaveLength(1)
    })

    it('is neither reported nor tried again when its copy fails afterwards', async () => {
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      let fail!: (error: Error) => void
      const failing = new Promise<void>((_resolve, reject) => (fail = reject))
      transport.beforePublish = (message) => (message.routingKey === 'q.dlq' ? failing : undefined)
      const delivery = deliver('m-1')
      await run()
      const closing = consumer.close({ drainTimeout: 0 })
      await run(5_000)
      expect(await settled(closing)).toBe(true)
      // The close says once that it gave up on it; its failed copy afterwards says nothing.
      const atClose = reported.map(([context]) => context)
      expect(atClose).toEqual([
        "closing the consumer on 'q': its message goes back to the queue and runs again",
      ])
      fail(new Error('the broker went away'))
      await run(60_000)
      expect(reported.map(([context]) => context)).toEqual(atClose)
      expect(publishesTo('q.dlq')).toHaveLength(1)
      expect(delivery.settlements).toEqual([])
      expect(callsOf('m-1').filter(([name]) => name === 'setAside')).toEqual([])
    })
  })

  describe('the copies it writes', () => {
    it('are persistent and mandatory, and wait out a blocked connection on the engine’s lane', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      deliver('m-1')
      await run()
      const [copy] = transport.published
      expect(copy?.message).toMatchObject({
        exchange: '',
        routingKey: 'q.dlq',
        persistent: true,
        mandatory: true,
      })
      expect(copy?.options).toMatchObject({ whenBlocked: 'wait', lane: 'engine' })
    })

    it('keep a message id that fits AMQP’s message-id, and travel without one that does not', async () => {
      await consume(ConsumerOptions.defaults(), () => {
        throw new FatalError('poison')
      })
      const fits = 'f'.repeat(MAX_ID_BYTES)
      const tooLong = 'é'.repeat(MAX_ID_BYTES / 2 + 1)
      deliver(fits)
      deliver(tooLong)
      await run()
      const copies = publishesTo('q.dlq')
      expect(copies).toHaveLength(2)
      expect(copies[0]?.properties.messageId).toBe(fits)
      expect(copies[1]?.properties).not.toHaveProperty('messageId')
      expect(takeAll('q.dlq').map((m) => m.id)).toEqual([fits, tooLong])
    })
  })

  describe('waits', () => {
    it('a retry’s wait ended by a drain hands the message back as it came; one begun after the drain waits its whole delay', async () => {
      let calls = 0
      await consume(ConsumerOptions.defaults(), () => {
        calls++
        return Ack.retry('busy', '2s')
      })
      const first = deliver('first')
      await run(500)
      expect(mq.waiting).toBe(1)
      await expect(mq.drainConsumers('1s')).resolves.toBe(true)
      await run()
      expect(first.settlements).toEqual(['requeue'])
      expect(mq.waiting).toBe(0)
      expect(takeAll('q')).toEqual([])
      mq.resumeConsuming()
      const second = deliver('second')
      await run(1_999)
      expect(second.settlements).toEqual([])
      expect(mq.waiting).toBe(1)
      await run(1)
      expect(second.settlements).toEqual(['ack'])
      expect(takeAll('q')).toEqual([{ id: 'second', attempt: 2, error: undefined }])
      expect(calls).toBe(2)
    })

    it('a retry’s wait whose channel goes meanwhile writes no copy: the broker has the message back', async () => {
      await consume(ConsumerOptions.defaults(), () => Ack.retry('busy', '2s'))
      const delivery = deliver('m-1', { settleable: true })
      await run(1_000)
      delivery.settleable = false
      await run(1_000)
      expect(publishesTo('q')).toEqual([])
      expect(delivery.settlements).toEqual(['requeue'])
      expect(mq.waiting).toBe(0)
      expect(mq.inFlight).toBe(0)
    })

    it('once over, counts the delivery as running again while its copy is written', async () => {
      await consume(ConsumerOptions.defaults(), () => Ack.retry('busy', '2s'))
      let release!: () => void
      const blocked = new Promise<void>((resolve) => (release = resolve))
      transport.beforePublish = (message) => (message.routingKey === 'q' ? blocked : undefined)
      const delivery = deliver('m-1')
      await run()
      expect([mq.waiting, mq.inFlight]).toEqual([1, 0])
      await run(2_000)
      expect([mq.waiting, mq.inFlight]).toEqual([0, 1])
      const drain = mq.drainConsumers('10s')
      await run(5_000)
      expect(await settled(drain)).toBe(false)
      release()
      await run()
      await expect(drain).resolves.toBe(true)
      expect(delivery.settlements).toEqual(['ack'])
      expect([mq.waiting, mq.inFlight]).toEqual([0, 0])
    })
  })

  describe('with an idempotency store', () => {
    /** A store whose operations the test can hold, fail or watch. */
    function watchedStore(): {
      store: ClaimingIdempotencyStore
      inner: InMemoryIdempotencyStore
      released: string[]
      confirmed: string[]
      claim: { hold: Promise<unknown> | undefined; fail: Error | undefined }
      hang: Set<'confirm' | 'release'>
    } {
      const inner = new InMemoryIdempotencyStore({ now: () => Date.now() })
      const released: string[] = []
      const confirmed: string[] = []
      const claim: { hold: Promise<unknown> | undefined; fail: Error | undefined } = {
        hold: undefined,
        fail: undefined,
      }
      const hang = new Set<'confirm' | 'release'>()
      const never = new Promise<never>(() => undefined)
      return {
        inner,
        released,
        confirmed,
        claim,
        hang,
        store: {
          tryClaim: async (id, owner) => {
            if (claim.hold !== undefined) await claim.hold
            if (claim.fail !== undefined) throw claim.fail
            return inner.tryClaim(id, owner)
          },
          claim: (id, owner) => inner.claim(id, owner),
          confirm: async (id, owner) => {
            if (hang.has('confirm')) return never
            confirmed.push(id)
            return inner.confirm(id, owner)
          },
          release: async (id, owner) => {
            if (hang.has('release')) return never
            released.push(id)
            return inner.release(id, owner)
          },
          isConfirmed: (id) => inner.isConfirmed(id),
        },
      }
    }

    it('gives back a claim that lands after the store timeout, and says which call timed out', async () => {
      const watched = watchedStore()
      let answer!: () => void
      watched.claim.hold = new Promise<void>((resolve) => (answer = resolve))
      let calls = 0
      await consume(
        ConsumerOptions.defaults()
          .idempotent(watched.store)
          .withStoreTimeout('1s')
          .withInProgressDelay('10s'),
        () => {
          calls++
        },
      )
      const delivery = deliver('m-1')
      await run(999)
      expect(reported).toEqual([])
      await run(1)
      expect(reported).toHaveLength(1)
      const [context, error] = reported[0] ?? []
      expect(context).toBe('the idempotency store could not claim message m-1')
      expect(error).toMatchObject({
        code: ErrorCodes.STORE_TIMEOUT,
        message: 'the idempotency store did not answer within 1000 ms (claiming message m-1)',
      })
      expect(await consumersDetails()).toMatchObject({ status: 'DEGRADED', failingStore: 'q' })
      answer()
      await run()
      expect(watched.released).toEqual(['m-1'])
      // Released: anyone may claim it now.
      expect(await watched.inner.tryClaim('m-1', 'someone-else')).toBe('claimed')
      expect(calls).toBe(0)
      expect(delivery.settlements).toEqual([])
      expect(mq.waiting).toBe(1)
    })

    it('gives back nothing when the answer landing after the store timeout is not a claim', async () => {
      const watched = watchedStore()
      expect(await watched.inner.tryClaim('m-1', 'earlier')).toBe('claimed')
      await watched.inner.confirm('m-1', 'earlier')
      let answer!: () => void
      watched.claim.hold = new Promise<void>((resolve) => (answer = resolve))
      await consume(
        ConsumerOptions.defaults().idempotent(watched.store).withStoreTimeout('1s'),
        () => undefined,
      )
      deliver('m-1')
      await run(1_000)
      expect(reported).toHaveLength(1)
      answer()
      await run()
      expect(watched.released).toEqual([])
    })

    it('keeps a claim answered in time, and releases nothing', async () => {
      const watched = watchedStore()
      await consume(ConsumerOptions.defaults().idempotent(watched.store), () => undefined)
      const delivery = deliver('m-1')
      await run(10_000)
      expect(delivery.settlements).toEqual(['ack'])
      expect(watched.released).toEqual([])
      expect(watched.confirmed).toEqual(['m-1'])
    })

    it('reports a confirm and a release that never answer, naming the call that timed out', async () => {
      const watched = watchedStore()
      watched.hang.add('confirm').add('release')
      await consume(
        ConsumerOptions.defaults()
          .idempotent(watched.store)
          .withStoreTimeout('1s')
          .withConcurrency(2),
        (message) => (message.envelope.id === 'released' ? Ack.release() : undefined),
      )
      deliver('confirmed')
      deliver('released')
      await run(10_000)
      const messages = reported.map(([context, error]) => [context, (error as Error).message])
      expect(messages).toEqual(
        expect.arrayContaining([
          [
            'could not confirm message confirmed',
            'the idempotency store did not answer within 1000 ms (confirming message confirmed)',
          ],
          [
            'could not release message released',
            'the idempotency store did not answer within 1000 ms (releasing message released)',
          ],
        ]),
      )
    })

    it('does not run the handler when the channel went while the store answered, and gives the claim back', async () => {
      const watched = watchedStore()
      let answer!: () => void
      watched.claim.hold = new Promise<void>((resolve) => (answer = resolve))
      let calls = 0
      await consume(ConsumerOptions.defaults().idempotent(watched.store), () => {
        calls++
      })
      const delivery = deliver('m-1', { settleable: true })
      await run()
      delivery.settleable = false
      answer()
      await run()
      expect(calls).toBe(0)
      expect(delivery.settlements).toEqual([])
      expect(watched.released).toEqual(['m-1'])
      expect(mq.inFlight).toBe(0)
    })

    it('parks an in-progress put-back that can never be written as it is, saying why and nothing more', async () => {
      const watched = watchedStore()
      expect(await watched.inner.tryClaim('m-1', 'someone-else')).toBe('claimed')
      await consume(
        ConsumerOptions.defaults().idempotent(watched.store).withInProgressDelay('2s'),
        () => undefined,
      )
      failPublishes(
        'q',
        new AceMqError('a header cannot be encoded', { code: ErrorCodes.UNENCODABLE }),
      )
      const delivery = deliver('m-1')
      await run(2_000)
      expect(delivery.settlements).toEqual(['ack'])
      expect(takeAll('q.parked')).toEqual([
        {
          id: 'm-1',
          attempt: 1,
          error:
            "could not republish to 'q' as it is (a header cannot be encoded); its application headers were dropped",
        },
      ])
    })

    it('ends an in-progress wait at a drain, handing the message back as it came', async () => {
      const watched = watchedStore()
      expect(await watched.inner.tryClaim('m-1', 'someone-else')).toBe('claimed')
      await consume(
        ConsumerOptions.defaults().idempotent(watched.store).withInProgressDelay('10s'),
        () => undefined,
      )
      const delivery = deliver('m-1')
      await run()
      expect(mq.waiting).toBe(1)
      await expect(mq.drainConsumers('1s')).resolves.toBe(true)
      await run()
      expect(delivery.settlements).toEqual(['requeue'])
      expect(publishesTo('q')).toEqual([])
      expect(callsOf('m-1').at(-1)).toEqual(['end', 'rejected'])
    })

    it('puts back a message the store could not claim, reported as a retry; one in progress elsewhere as in progress', async () => {
      const watched = watchedStore()
      expect(await watched.inner.tryClaim('busy', 'someone-else')).toBe('claimed')
      await consume(
        ConsumerOptions.defaults().idempotent(watched.store).withInProgressDelay('2s'),
        () => undefined,
      )
      deliver('busy')
      await run(2_000)
      expect(callsOf('busy')).toEqual([['end', 'in_progress']])
      watched.claim.fail = new Error('the database went away')
      deliver('failing')
      await run(2_000)
      expect(callsOf('failing')).toEqual([
        ['retried', 2_000, false],
        ['end', 'retried'],
      ])
      expect(takeAll('q')).toEqual([
        { id: 'busy', attempt: 1, error: undefined },
        { id: 'failing', attempt: 1, error: undefined },
      ])
    })

    it('neither confirms nor acks for a handler given up on at a close', async () => {
      const watched = watchedStore()
      let finish!: () => void
      const stuck = new Promise<void>((resolve) => (finish = resolve))
      const consumer = await mq.consume(
        'q',
        ConsumerOptions.defaults().idempotent(watched.store),
        () => stuck,
      )
      const delivery = deliver('m-1')
      await run()
      const closing = consumer.close({ drainTimeout: 0 })
      await run(5_000)
      expect(await settled(closing)).toBe(true)
      finish()
      await run(1_000)
      expect(delivery.settlements).toEqual([])
      expect(watched.confirmed).toEqual([])
      expect(await watched.inner.isConfirmed('m-1')).toBe(false)
    })
  })
})
