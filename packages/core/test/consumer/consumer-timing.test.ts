import { RecordingTransport } from '@acemq/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  Topology,
  type HandlerContext,
  type Message,
} from '../../src/index.js'
import { readEnvelope, type ClaimingIdempotencyStore } from '../../src/spi.js'
import { START, closeOnFakeClock, run, settled, useFakeClock } from './fake-clock.js'

// The consumer's timed behaviour on a fake clock: the store retries' 100 ms / 500 ms / 2 s, the
// 5 s abandon grace of a close, a retry wait that frees its handler slot. The same promises are
// kept by real-time tests in the kit's scenarios (test/engine/); here each instant is exact, and
// the tests take milliseconds (the mutation run, docs/mutation.md, leaves the real-time ones out).

describe('the consumer’s timed behaviour (fake clock)', () => {
  let memory: InMemoryTransport
  let transport: RecordingTransport
  let mq: AceMq
  let reported: [string, string][]

  beforeEach(async () => {
    useFakeClock()
    memory = new InMemoryTransport()
    transport = new RecordingTransport(memory)
    reported = []
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([context, String(error)]),
    })
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  async function declare(queue: string): Promise<void> {
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
  }

  /** Attempts of the messages on `queue`, taken off it. */
  function attemptsOn(queue: string): number[] {
    const attempts: number[] = []
    for (;;) {
      const message = memory.get(queue)
      if (message === undefined) return attempts
      attempts.push(
        readEnvelope(message.headers, {
          messageId: message.properties.messageId,
          routingKey: queue,
        }).envelope.attempt,
      )
    }
  }

  /** A store whose confirm or release fails the first `failures` times it is asked. */
  function failing(
    which: 'confirm' | 'release',
    failures: number,
  ): { store: ClaimingIdempotencyStore; calls: number[] } {
    const inner = new InMemoryIdempotencyStore({ now: () => Date.now() })
    const calls: number[] = []
    let left = failures
    const flaky = async (real: () => Promise<void>): Promise<void> => {
      calls.push(Date.now() - START)
      if (left-- > 0) throw new Error(`the database went away (${which})`)
      await real()
    }
    return {
      calls,
      store: {
        tryClaim: (id, owner) => inner.tryClaim(id, owner),
        claim: (id, owner) => inner.claim(id, owner),
        confirm: (id, owner) =>
          which === 'confirm' ? flaky(() => inner.confirm(id, owner)) : inner.confirm(id, owner),
        release: (id, owner) =>
          which === 'release' ? flaky(() => inner.release(id, owner)) : inner.release(id, owner),
        isConfirmed: (id) => inner.isConfirmed(id),
      },
    }
  }

  describe('a confirm that fails', () => {
    it('is tried again after 100 ms, 500 ms and 2 s, then the message is acked and the failure reported once', async () => {
      await declare('confirms')
      const { store, calls } = failing('confirm', 4)
      let handled = 0
      await mq.consume('confirms', ConsumerOptions.defaults().idempotent(store), () => {
        handled++
      })
      await mq.publisher('', 'confirms').send({}, { id: 'order-1' })
      await run()
      expect(calls).toEqual([0])
      await run(99)
      expect(calls).toEqual([0])
      await run(1)
      expect(calls).toEqual([0, 100])
      await run(499)
      expect(calls).toEqual([0, 100])
      await run(1)
      expect(calls).toEqual([0, 100, 600])
      // Unsettled while the confirm is still being tried.
      expect(transport.settlementsOf('order-1')).toEqual([])
      expect(mq.inFlight).toBe(1)
      await run(1_999)
      expect(calls).toEqual([0, 100, 600])
      expect(reported).toEqual([])
      await run(1)
      expect(calls).toEqual([0, 100, 600, 2_600])
      expect(reported).toEqual([
        ['could not confirm message order-1', expect.stringMatching(/went away \(confirm\)/)],
      ])
      expect(transport.settlementsOf('order-1')).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
      const health = await mq.health()
      expect(health.status).toBe('DEGRADED')
      expect(JSON.stringify(health)).toContain('"failingStore":"confirms"')
      expect(JSON.stringify(health)).toMatch(/"storeError":"[^"]*went away \(confirm\)/)
      expect(mq.inFlight).toBe(0)
      await run(60_000)
      expect(calls).toHaveLength(4)
      expect(handled).toBe(1)
      expect(memory.messageCount('confirms')).toBe(0)
      expect(memory.messageCount('confirms.dlq')).toBe(0)
    })

    it('that succeeds on its second try is neither reported nor tried a third time', async () => {
      await declare('confirms-once')
      const { store, calls } = failing('confirm', 1)
      await mq.consume('confirms-once', ConsumerOptions.defaults().idempotent(store), () => {})
      await mq.publisher('', 'confirms-once').send({}, { id: 'order-2' })
      await run(100)
      expect(calls).toEqual([0, 100])
      expect(transport.settlementsOf('order-2')).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
      await run(10_000)
      expect(calls).toEqual([0, 100])
      expect(reported).toEqual([])
      expect((await mq.health()).status).toBe('UP')
    })
  })

  describe('a release that fails', () => {
    it('is tried again after 100 ms, 500 ms and 2 s, then the claim is left to lapse and the failure reported once', async () => {
      await declare('releases')
      const { store, calls } = failing('release', 4)
      await mq.consume('releases', ConsumerOptions.defaults().idempotent(store), () =>
        Ack.release(),
      )
      await mq.publisher('', 'releases').send({}, { id: 'job-1' })
      await run()
      // The delivery goes back at once; the release goes on in the background.
      expect(transport.settlementsOf('job-1')[0]).toEqual(
        expect.objectContaining({ kind: 'nack', requeue: true }),
      )
      mq.pauseConsuming()
      expect(calls).toEqual([0])
      await run(99)
      expect(calls).toEqual([0])
      await run(1)
      expect(calls).toEqual([0, 100])
      await run(500)
      expect(calls).toEqual([0, 100, 600])
      await run(1_999)
      expect(reported).toEqual([])
      await run(1)
      expect(calls).toEqual([0, 100, 600, 2_600])
      expect(reported).toEqual([
        ['could not release message job-1', expect.stringMatching(/went away \(release\)/)],
      ])
      await run(60_000)
      expect(calls).toHaveLength(4)
    })

    it('that succeeds on its second try is neither reported nor tried a third time', async () => {
      await declare('releases-once')
      const { store, calls } = failing('release', 1)
      await mq.consume('releases-once', ConsumerOptions.defaults().idempotent(store), () =>
        Ack.release(),
      )
      mq.pauseConsuming()
      await mq.publisher('', 'releases-once').send({}, { id: 'job-2' })
      mq.resumeConsuming()
      await run()
      mq.pauseConsuming()
      await run(100)
      expect(calls).toEqual([0, 100])
      await run(10_000)
      expect(calls).toEqual([0, 100])
      expect(reported).toEqual([])
    })
  })

  describe('closing', () => {
    it('aborts the signal of a handler that ignores it at the drain timeout, gives up on it 5 s later, and never sends its late ack', async () => {
      await declare('stubborn')
      let finish!: () => void
      const stuck = new Promise<void>((resolve) => (finish = resolve))
      let abortedAt: number | undefined
      const consumer = await mq.consume(
        'stubborn',
        ConsumerOptions.defaults(),
        async (_message: Message<unknown>, { signal }: HandlerContext) => {
          signal.addEventListener('abort', () => (abortedAt = Date.now() - START))
          await stuck
        },
      )
      await mq.publisher('', 'stubborn').send({}, { id: 'stubborn' })
      await run()
      expect(mq.inFlight).toBe(1)
      const closing = consumer.close({ drainTimeout: 1_000 })
      await run(999)
      expect(abortedAt).toBeUndefined()
      await run(1)
      expect(abortedAt).toBe(1_000)
      await run(4_999)
      expect(await settled(closing)).toBe(false)
      expect(mq.inFlight).toBe(1)
      await run(1)
      expect(await settled(closing)).toBe(true)
      // Given up on: nothing counts it, nothing waits for it, and the broker has it back.
      expect(mq.inFlight).toBe(0)
      expect(await mq.drainConsumers(0)).toBe(true)
      expect(memory.messageCount('stubborn')).toBe(1)
      // Said once: a handler that hangs through a close is something to look at (issue 35 item 3).
      expect(reported).toEqual([
        [
          "closing the consumer on 'stubborn': its message goes back to the queue and runs again",
          'AceMqError: gave up on 1 handler that did not return within the drain and the 5 s grace after its signal was aborted',
        ],
      ])
      finish()
      await run(1_000)
      expect(transport.settlementsOf('stubborn')).toEqual([])
      expect(memory.messageCount('stubborn.dlq')).toBe(0)
    })

    it('waits for its running handler, hands the queued deliveries back at attempt 1 without running them', async () => {
      await declare('queued')
      const started: string[] = []
      let finished = false
      const consumer = await mq.consume(
        'queued',
        ConsumerOptions.defaults().withPrefetch(20),
        async (message) => {
          started.push(message.envelope.id)
          await new Promise((resolve) => setTimeout(resolve, 1_000))
          finished = true
        },
      )
      await mq.publisher('', 'queued').sendAll(Array.from({ length: 10 }, (_, i) => ({ i })))
      await run()
      expect(started).toHaveLength(1)
      const closing = consumer.close({ drainTimeout: '20s' })
      await run(999)
      expect(await settled(closing)).toBe(false)
      expect(finished).toBe(false)
      await run(1)
      expect(await settled(closing)).toBe(true)
      expect(finished).toBe(true)
      expect(started).toHaveLength(1)
      expect(transport.settlementsOf(started[0] as string)).toEqual([
        expect.objectContaining({ kind: 'ack', written: true }),
      ])
      expect(attemptsOn('queued')).toEqual(Array(9).fill(1))
    })

    it('of the connection gives every consumer one shared deadline: the drain timeout and one 5 s grace', async () => {
      await declare('stubborn-a')
      await declare('stubborn-b')
      const never = (): Promise<void> => new Promise(() => undefined)
      await mq.consume('stubborn-a', ConsumerOptions.defaults(), never)
      await mq.consume('stubborn-b', ConsumerOptions.defaults(), never)
      await mq.publisher('', 'stubborn-a').send({})
      await mq.publisher('', 'stubborn-b').send({})
      await run()
      expect(mq.inFlight).toBe(2)
      const closing = mq.close({ drainTimeout: 300 })
      await run(5_299)
      expect(await settled(closing)).toBe(false)
      await run(1)
      expect(await settled(closing)).toBe(true)
      expect(memory.messageCount('stubborn-a')).toBe(1)
      expect(memory.messageCount('stubborn-b')).toBe(1)
    })
  })

  it('lets the next delivery run while one waits out a consumer-side retry delay, and retries that one when its delay is over', async () => {
    await declare('slot')
    const handled: [string, number][] = []
    let failedOnce = false
    await mq.consume('slot', ConsumerOptions.defaults().withConcurrency(1), (message) => {
      const id = message.envelope.id
      if (id === 'slow' && !failedOnce) {
        failedOnce = true
        return Ack.retry('not yet', 2_000)
      }
      handled.push([id, Date.now() - START])
      return undefined
    })
    await mq.publisher('', 'slot').send({}, { id: 'slow' })
    await run()
    expect(failedOnce).toBe(true)
    expect(mq.waiting).toBe(1)
    expect(mq.inFlight).toBe(0)
    await mq.publisher('', 'slot').send({}, { id: 'next' })
    await run()
    expect(handled).toEqual([['next', 0]])
    await run(1_999)
    expect(handled).toEqual([['next', 0]])
    expect(mq.waiting).toBe(1)
    // The copy is published at 2 s; the in-memory broker delivers it a tick later.
    await run(1)
    expect(mq.waiting).toBe(0)
    await run(1)
    expect(handled).toEqual([
      ['next', 0],
      ['slow', 2_001],
    ])
    expect(mq.waiting).toBe(0)
  })
})
