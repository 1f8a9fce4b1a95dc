import { describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  RetryPolicy,
  Topology,
  type HandlerContext,
  type Message,
} from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { type BrokerProbe, type ScenarioTarget } from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'
import { eventually, sleep } from '../helpers/eventually.js'
import { RecordingTransport } from './recording-transport.js'
import { uniqueName } from '../services/services.js'

/**
 * The shutdown scenarios of docs/design.md §8 — pause, drain, close, cancellation — run against every
 * transport. Each scenario uses its own queue and connection.
 */
export function shutdownScenarios(name: string, target: ScenarioTarget): void {
  describe(`shutdown on ${name}`, () => {
    let transport: RecordingTransport
    let mq: AceMq
    let probe: BrokerProbe & { close(): Promise<void> }
    const queues: string[] = []
    eachScenario<RecordingTransport>(
      target,
      queues,
      (connection) => {
        ;({ transport, mq, probe } = connection)
      },
      { wrap: (inner) => new RecordingTransport(inner) },
    )

    async function queue(): Promise<string> {
      const q = uniqueName('shutdown')
      queues.push(q)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return q
    }

    async function attemptsOnQueue(q: string, count: number): Promise<number[]> {
      const attempts: number[] = []
      for (let i = 0; i < count; i++) {
        const m = await probe.get(q)
        if (m === undefined) break
        attempts.push(
          readEnvelope(m.headers, { messageId: m.messageId, routingKey: q }).envelope.attempt,
        )
      }
      return attempts
    }

    it('holds deliveries while paused and hands the same message over on resume', async () => {
      const q = await queue()
      const seen: string[] = []
      mq.pauseConsuming()
      await mq.consume(q, ConsumerOptions.defaults(), (m) => {
        seen.push(m.envelope.id)
      })
      await mq.publisher('', q).send({ n: 1 }, { id: 'held-1' })
      await eventually(() => mq.held === 1, 5_000, 'one held delivery')
      await sleep(100)
      expect(seen).toEqual([])
      expect(mq.inFlight).toBe(0)
      mq.resumeConsuming()
      await eventually(() => seen.length === 1)
      expect(seen).toEqual(['held-1'])
      await eventually(() => mq.held === 0 && mq.inFlight === 0)
    })

    it('drains to true once a 200 ms handler has finished', async () => {
      const q = await queue()
      let finished = false
      await mq.consume(q, ConsumerOptions.defaults(), async () => {
        await sleep(200)
        finished = true
      })
      await mq.publisher('', q).send({})
      await eventually(() => mq.inFlight === 1)
      expect(await mq.drainConsumers('5s')).toBe(true)
      expect(finished).toBe(true)
      expect(mq.inFlight).toBe(0)
      expect(mq.consumingPaused).toBe(true)
    })

    it('drains to false at a 300 ms timeout while a 3 s handler runs', async () => {
      const q = await queue()
      await mq.consume(q, ConsumerOptions.defaults(), async (_m, { signal }) => {
        await sleep(3_000)
        signal.throwIfAborted()
      })
      await mq.publisher('', q).send({})
      await eventually(() => mq.inFlight === 1)
      const started = Date.now()
      expect(await mq.drainConsumers(300)).toBe(false)
      expect(Date.now() - started).toBeLessThan(1_000)
      expect(mq.inFlight).toBe(1)
    })

    it('rejects a drain when its signal aborts, and at once when it already has', async () => {
      const q = await queue()
      await mq.consume(q, ConsumerOptions.defaults(), () => sleep(2_000))
      await mq.publisher('', q).send({})
      await eventually(() => mq.inFlight === 1)
      const controller = new AbortController()
      const drain = mq.drainConsumers('10s', controller.signal)
      setTimeout(() => controller.abort(), 50)
      await expect(drain).rejects.toMatchObject({ name: 'AbortError' })

      mq.resumeConsuming()
      expect(mq.consumingPaused).toBe(false)
      await expect(mq.drainConsumers('10s', AbortSignal.abort())).rejects.toMatchObject({
        name: 'AbortError',
      })
      expect(mq.consumingPaused).toBe(false)
    })

    it('drains to true with a delivery held at the gate, and counts it in held', async () => {
      const q = await queue()
      mq.pauseConsuming()
      await mq.consume(q, ConsumerOptions.defaults(), () => undefined)
      await mq.publisher('', q).send({})
      await eventually(() => mq.held === 1)
      expect(await mq.drainConsumers('1s')).toBe(true)
      expect(mq.held).toBe(1)
    })

    it('closes once its running 1 s handler is done, without running the 9 queued, and hands them back at attempt 1', async () => {
      const q = await queue()
      const started: string[] = []
      let finished = false
      await mq.consume(q, ConsumerOptions.defaults().withPrefetch(20), async (m) => {
        started.push(m.envelope.id)
        await sleep(1_000)
        finished = true
      })
      await mq.publisher('', q).sendAll(Array.from({ length: 10 }, (_, i) => ({ i })))
      await eventually(() => started.length === 1)
      const began = Date.now()
      await mq.close()
      const took = Date.now() - began
      // In order: the running handler finished before close answered, and nothing queued ran.
      // Running the nine as well would take ten seconds; the margin holds on a loaded machine.
      expect(finished).toBe(true)
      expect(took).toBeLessThan(5_000)
      expect(started).toHaveLength(1)
      await eventually(
        async () => (await probe.count(q)) === 9,
        5_000,
        'nine messages back on the queue',
      )
      expect(await attemptsOnQueue(q, 9)).toEqual(Array(9).fill(1))
      const first = started[0] as string
      expect(transport.settlementsOf(first)).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
    })

    it('cuts a retry wait short on close and requeues the message with its attempt unchanged', async () => {
      const q = await queue()
      let calls = 0
      await mq.consume(q, ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(5, '20s')), () => {
        calls++
        throw new Error('down')
      })
      await mq.publisher('', q).send({}, { id: 'waiting' })
      await eventually(() => calls === 1)
      await sleep(50)
      const began = Date.now()
      await mq.close()
      expect(Date.now() - began).toBeLessThan(1_000)
      await eventually(
        async () => (await probe.count(q)) === 1,
        5_000,
        'the message back on the queue',
      )
      expect(await attemptsOnQueue(q, 1)).toEqual([1])
      expect(transport.settlementsOf('waiting')).toEqual([
        expect.objectContaining({ kind: 'nack', requeue: true }),
      ])
    })

    it('cuts an in-progress wait short on close and requeues the message with its attempt unchanged', async () => {
      const q = await queue()
      const store = new InMemoryIdempotencyStore()
      expect(await store.tryClaim('busy-elsewhere')).toBe('claimed')
      let calls = 0
      await mq.consume(
        q,
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay('20s'),
        () => {
          calls++
        },
      )
      await mq.publisher('', q).send({}, { id: 'busy-elsewhere' })
      // Waiting to put it back is no running handler.
      await eventually(() => mq.waiting === 1)
      expect(mq.inFlight).toBe(0)
      const began = Date.now()
      await mq.close()
      expect(Date.now() - began).toBeLessThan(1_000)
      expect(calls).toBe(0)
      await eventually(
        async () => (await probe.count(q)) === 1,
        5_000,
        'the message back on the queue',
      )
      expect(await attemptsOnQueue(q, 1)).toEqual([1])
    })

    it('abandons a handler that ignores its signal after 5 s, closes, and never sends its late ack', async () => {
      const q = await queue()
      let release!: () => void
      const stuck = new Promise<void>((resolve) => (release = resolve))
      let sawAbort = false
      await mq.consume(
        q,
        ConsumerOptions.defaults(),
        async (_m: Message<unknown>, { signal }: HandlerContext) => {
          signal.addEventListener('abort', () => (sawAbort = true))
          await stuck
        },
      )
      await mq.publisher('', q).send({}, { id: 'stubborn' })
      await eventually(() => mq.inFlight === 1)
      const began = Date.now()
      await mq.close({ drainTimeout: 0 })
      const took = Date.now() - began
      // Given up on after the 5 s abandon timeout, not waited for: the upper bound is a margin a
      // loaded machine keeps, far under waiting for ever (the test's own timeout).
      expect(took).toBeGreaterThanOrEqual(4_900)
      expect(took).toBeLessThan(15_000)
      expect(sawAbort).toBe(true)
      expect(mq.transport.state.closed).toBe(true)
      await eventually(
        async () => (await probe.count(q)) === 1,
        5_000,
        'the message redelivered to the queue',
      )
      const publishedBefore = transport.published.length
      release()
      await sleep(100)
      expect(transport.settlementsOf('stubborn')).toEqual([])
      expect(transport.published.length).toBe(publishedBefore)
    }, 20_000)

    it('returns promptly when close is called from inside a handler', async () => {
      const q = await queue()
      let closed: Promise<void> | undefined
      let took = -1
      await mq.consume(q, ConsumerOptions.defaults(), async () => {
        const began = Date.now()
        closed = mq.close()
        await closed
        took = Date.now() - began
      })
      await mq.publisher('', q).send({})
      await eventually(() => took >= 0, 10_000, 'the close to return')
      expect(took).toBeLessThan(1_000)
    })

    it('lets a handler’s confirmed publish complete when its consumer is disposed meanwhile', async () => {
      const q = await queue()
      const out = await queue()
      let started = false
      let published = false
      const consumer = await mq.consume(q, ConsumerOptions.defaults(), async () => {
        started = true
        await sleep(100)
        await mq.publisher('', out).send({ forwarded: true })
        published = true
      })
      await mq.publisher('', q).send({}, { id: 'forward-me' })
      await eventually(() => started)
      await consumer.close()
      expect(published).toBe(true)
      expect(await probe.count(out)).toBe(1)
      expect(await probe.count(q)).toBe(0)
      expect(transport.settlementsOf('forward-me')).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
    })

    it('closes a consumer from inside its own handler promptly, and that handler’s ack still lands', async () => {
      const q = await queue()
      let took = -1
      let consumer: { close(): Promise<void> } | undefined
      consumer = await mq.consume(q, ConsumerOptions.defaults(), async () => {
        const began = Date.now()
        await consumer?.close()
        took = Date.now() - began
      })
      await mq.publisher('', q).send({}, { id: 'self-close' })
      await eventually(() => took >= 0, 10_000, 'the consumer close to return')
      expect(took).toBeLessThan(1_000)
      await eventually(() => transport.settlementsOf('self-close').length === 1)
      expect(transport.settlementsOf('self-close')).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
      await sleep(100)
      expect(await probe.count(q)).toBe(0)
      consumer = undefined
    })

    // A handler is known by its async context (AsyncLocalStorage: promise hooks on Node 20,
    // AsyncContextFrame from Node 24), which must survive every kind of wait a handler makes.
    it('knows a close comes from inside a handler after that handler awaited a timer, an immediate and a confirmed publish', async () => {
      const q = await queue()
      const out = await queue()
      let took = -1
      await mq.consume(q, ConsumerOptions.defaults(), async () => {
        await sleep(20)
        await new Promise((resolve) => setImmediate(resolve))
        await mq.publisher('', out).send({ forwarded: true })
        const began = Date.now()
        await mq.close()
        took = Date.now() - began
      })
      await mq.publisher('', q).send({}, { id: 'close-after-waits' })
      await eventually(() => took >= 0, 10_000, 'the close to return')
      expect(took).toBeLessThan(1_000)
      await eventually(() => transport.settlementsOf('close-after-waits').length === 1)
      expect(transport.settlementsOf('close-after-waits')).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
    })

    it('answers a drain true only once a cut-short retry wait has handed its message back', async () => {
      const q = await queue()
      let calls = 0
      await mq.consume(q, ConsumerOptions.defaults(), () => {
        calls++
        return calls === 1 ? Ack.retry('later', 30_000) : undefined
      })
      mq.pauseConsuming()
      await mq.publisher('', q).send({}, { id: 'settling' })
      await eventually(() => mq.held === 1)
      mq.resumeConsuming()
      await eventually(() => calls === 1)
      await eventually(() => mq.waiting === 1)
      expect(mq.inFlight).toBe(0)
      const began = Date.now()
      expect(await mq.drainConsumers('5s')).toBe(true)
      // A wait is no running handler: the drain ended it at once (long before its 30 s)…
      expect(Date.now() - began).toBeLessThan(5_000)
      // …and the message was handed back, attempt unchanged, before the drain answered.
      const copies = transport.published.filter(
        (m) => m.routingKey === q && m.properties.messageId === 'settling',
      )
      expect(
        copies.map((m) => readEnvelope(m.headers, { routingKey: q }).envelope.attempt),
      ).toEqual([1])
      expect(transport.settlementsOf('settling')).toEqual([
        expect.objectContaining({ kind: 'nack', requeue: true, written: true }),
      ])
    })

    it('still dead-letters a message given up on while closing', async () => {
      const q = await queue()
      let aborted = false
      await mq.consume(
        q,
        ConsumerOptions.defaults().withRetry(RetryPolicy.none()),
        async (_m: Message<unknown>, { signal }: HandlerContext) => {
          await new Promise((resolve) => signal.addEventListener('abort', resolve))
          aborted = true
          throw new Error('cancelled by the shutdown')
        },
      )
      await mq.publisher('', q).send({}, { id: 'given-up' })
      await eventually(() => mq.inFlight === 1)
      await mq.close({ drainTimeout: 0 })
      expect(aborted).toBe(true)
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 5_000, 'the dlq copy')
      expect(await probe.count(q)).toBe(0)
    })

    it('shares one close deadline between consumers instead of waiting for each in turn', async () => {
      const a = await queue()
      const b = await queue()
      const stubborn = (): Promise<void> => new Promise(() => undefined)
      await mq.consume(a, ConsumerOptions.defaults(), stubborn)
      await mq.consume(b, ConsumerOptions.defaults(), stubborn)
      await mq.publisher('', a).send({})
      await mq.publisher('', b).send({})
      await eventually(() => mq.inFlight === 2)
      const began = Date.now()
      await mq.close({ drainTimeout: 300 })
      // One deadline: ~5.3 s (300 ms, then the 5 s abandon timeout) for both; one each would be
      // ~10.6 s. The bound sits between, with a margin a loaded machine keeps.
      expect(Date.now() - began).toBeLessThan(9_000)
    }, 20_000)

    it('is safe to close twice', async () => {
      const q = await queue()
      await mq.consume(q, ConsumerOptions.defaults(), () => undefined)
      await Promise.all([mq.close(), mq.close()])
      await mq.close()
      expect(mq.transport.state.closed).toBe(true)
    })
  })
}
