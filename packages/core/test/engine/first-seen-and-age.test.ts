import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConsumerOptions,
  FatalError,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  RetryPolicy,
  Topology,
  type Envelope,
} from '../../src/index.js'
import { readEnvelope } from '../../src/spi.js'
import { START, closeOnFakeClock, run, useFakeClock } from '../consumer/fake-clock.js'

// On a fake clock: every copy the engine writes is made at a known instant, so a first-seen
// stamped anew (the copy's time instead of the first publish's) shows as a different number,
// and an age is exactly what the test says it is.
const HOUR = 3_600_000

describe('first-seen and message age on the copies the engine writes (fake clock)', () => {
  let transport: InMemoryTransport
  let mq: AceMq

  beforeEach(async () => {
    useFakeClock()
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  /** The envelope of the oldest message on `queue`, taken off it. */
  function take(queue: string): Envelope {
    const message = transport.get(queue)
    if (message === undefined) throw new Error(`nothing on ${queue}`)
    return readEnvelope(message.headers, {
      messageId: message.properties.messageId,
      routingKey: queue,
    }).envelope
  }

  async function declare(queue: string, policy?: RetryPolicy): Promise<void> {
    await mq.applyTopology(
      policy === undefined
        ? Topology.define().queueWithDeadLetter(queue)
        : Topology.define().queueWithRetry(queue, policy),
    )
  }

  describe('an in-progress put-back', () => {
    it('keeps the first publish’s first-seen on the copy it puts back', async () => {
      const firstSeen = START - 5 * 60_000
      await declare('put-back')
      const store = new InMemoryIdempotencyStore({ now: () => Date.now() })
      // Someone else holds a live claim on the id: the consumer must put the message back.
      expect(await store.share().tryClaim('m-1', 'someone-else')).toBe('claimed')
      const seen: Envelope[] = []
      await mq.consume(
        'put-back',
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay('2s'),
        (message) => {
          seen.push(message.envelope)
        },
      )
      mq.pauseConsuming()
      await mq.publisher('', 'put-back').send({}, { id: 'm-1', firstSeen })
      mq.resumeConsuming()
      await run(1_000)
      expect(seen).toEqual([])
      // The claim is let go while the message waits out its in-progress delay.
      await store.share().release('m-1', 'someone-else')
      await run(5_000)
      expect(seen).toHaveLength(1)
      expect(seen[0]?.firstSeen).toBe(firstSeen)
      expect(seen[0]?.attempt).toBe(1)
    })

    it('stamps the put-back time on a message that came without a first-seen', async () => {
      await declare('put-back-raw')
      const store = new InMemoryIdempotencyStore({ now: () => Date.now() })
      expect(await store.share().tryClaim('raw-1', 'someone-else')).toBe('claimed')
      const seen: Envelope[] = []
      await mq.consume(
        'put-back-raw',
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay('2s'),
        (message) => {
          seen.push(message.envelope)
        },
      )
      await run(5_000)
      await transport.publish({
        exchange: '',
        routingKey: 'put-back-raw',
        body: Buffer.from('{}'),
        headers: { 'x-acemq-id': 'raw-1' },
        properties: { contentType: 'application/json' },
        persistent: true,
        mandatory: true,
      })
      await run(0)
      // Delivered, found in progress, and waiting out its 2 s before it is put back.
      const putBackAt = Date.now() + 2_000
      await store.share().release('raw-1', 'someone-else')
      await run(5_000)
      expect(seen).toHaveLength(1)
      // Within the delivery's own millisecond of latency.
      expect(seen[0]?.firstSeen).toBeGreaterThanOrEqual(putBackAt)
      expect(seen[0]?.firstSeen).toBeLessThan(putBackAt + 100)
    })
  })

  describe('dead-letter and parked copies', () => {
    it.each([
      ['Ack.deadLetter', 'dlq', () => Ack.deadLetter('refund window closed')],
      ['Ack.park', 'parked', () => Ack.park('needs a person')],
      [
        'a FatalError',
        'dlq',
        () => {
          throw new FatalError('no customer')
        },
      ],
    ] as const)(
      'a copy set aside by %s keeps the first publish’s first-seen',
      async (_how, suffix, handler) => {
        const queue = `set-aside-${suffix}`
        const firstSeen = START - 2 * HOUR
        await declare(queue)
        await mq.consume(queue, ConsumerOptions.defaults(), handler)
        await run(5_000)
        await mq.publisher('', queue).send({}, { id: 'm-1', firstSeen })
        await run(0)
        await run(0)
        const copy = take(`${queue}.${suffix}`)
        expect(copy.firstSeen).toBe(firstSeen)
        expect(copy.id).toBe('m-1')
      },
    )

    it('a copy that ran out of attempts keeps the first publish’s first-seen', async () => {
      const policy = RetryPolicy.fixed(3, '10s')
      await declare('exhausted', policy)
      const firstSeen = START - 10 * 60_000
      await mq.consume('exhausted', ConsumerOptions.defaults().withRetry(policy), () => {
        throw new Error('down')
      })
      await mq.publisher('', 'exhausted').send({}, { id: 'm-1', firstSeen })
      await run(30_000)
      const copy = take('exhausted.dlq')
      expect(copy.error).toBe('gave up after 3 attempt(s): down')
      expect(copy.attempt).toBe(3)
      expect(copy.firstSeen).toBe(firstSeen)
    })

    it('a body that does not decode is parked with its first-seen', async () => {
      await declare('undecodable')
      const firstSeen = START - HOUR
      await mq.consume('undecodable', ConsumerOptions.defaults(), () => undefined)
      await transport.publish({
        exchange: '',
        routingKey: 'undecodable',
        body: Buffer.from('{not json'),
        headers: { 'x-acemq-id': 'bad-1', 'x-acemq-first-seen': firstSeen },
        properties: { contentType: 'application/json' },
        persistent: true,
        mandatory: true,
      })
      await run(0)
      await run(0)
      const copy = take('undecodable.parked')
      expect(copy.error).toMatch(/^could not decode: /)
      expect(copy.firstSeen).toBe(firstSeen)
    })
  })

  describe('giving up by age (giveUpAfter)', () => {
    it('dead-letters a message already older than the limit after its first attempt, saying so', async () => {
      const policy = RetryPolicy.fixed(5, '1s').giveUpAfter('1h')
      await declare('too-old', policy)
      const attempts: number[] = []
      await mq.consume('too-old', ConsumerOptions.defaults().withRetry(policy), (message) => {
        attempts.push(message.envelope.attempt)
        throw new Error('payment service down')
      })
      await mq.publisher('', 'too-old').send({}, { id: 'm-1', firstSeen: START - 2 * HOUR })
      await run(0)
      await run(0)
      const copy = take('too-old.dlq')
      expect(copy.error).toBe('gave up on a message older than 1h: payment service down')
      expect(attempts).toEqual([1])
      expect(copy.attempt).toBe(1)
    })

    it('gives up on the attempt at which the message reaches the limit, with attempts to spare', async () => {
      const policy = RetryPolicy.fixed(10, '1s').giveUpAfter('1h')
      await declare('ages-out', policy)
      const seen: { attempt: number; at: number }[] = []
      await mq.consume('ages-out', ConsumerOptions.defaults().withRetry(policy), (message) => {
        seen.push({ attempt: message.envelope.attempt, at: Date.now() })
        throw new Error('still down')
      })
      // 1.5 s short of the limit: attempt 1 at age 1h − 1.5 s and attempt 2 at 1h − 0.5 s are
      // retried, attempt 3 at 1h + 0.5 s is given up on.
      const firstSeen = START - HOUR + 1_500
      await mq.publisher('', 'ages-out').send({}, { id: 'm-1', firstSeen })
      await run(10_000)
      expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3])
      // Each attempt a second (and a delivery's millisecond) after the one before it.
      const ages = seen.map((s) => s.at - firstSeen)
      expect(ages[1]).toBeLessThan(HOUR)
      expect(ages[2]).toBeGreaterThanOrEqual(HOUR)
      const copy = take('ages-out.dlq')
      expect(copy.error).toBe('gave up on a message older than 1h: still down')
      expect(copy.attempt).toBe(3)
      expect(copy.firstSeen).toBe(firstSeen)
      expect(transport.messageCount('ages-out')).toBe(0)
    })

    it('gives up on a message exactly as old as the limit', async () => {
      const policy = RetryPolicy.fixed(5, '1s').giveUpAfter('1h')
      await declare('exactly-old', policy)
      let calls = 0
      await mq.consume('exactly-old', ConsumerOptions.defaults().withRetry(policy), () => {
        calls++
        throw new Error('down')
      })
      await mq.publisher('', 'exactly-old').send({}, { id: 'm-1', firstSeen: START - HOUR })
      await run(0)
      await run(0)
      expect(take('exactly-old.dlq').error).toBe('gave up on a message older than 1h: down')
      expect(calls).toBe(1)
    })
  })
})
