import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  FatalError,
  InMemoryTransport,
  AceMqError,
  ErrorCodes,
  InMemoryIdempotencyStore,
  Topology,
} from '../../src/index.js'
import {
  readEnvelope,
  type ClaimingIdempotencyStore,
  type Declaration,
  type Delivery,
  type TransportConsumeOptions,
  type TransportSubscription,
  type OutgoingMessage,
  type TransportPublishOptions,
} from '../../src/spi.js'
import { START, closeOnFakeClock, run, useFakeClock } from './fake-clock.js'

// What the consumer tells the application when something goes wrong (onError's context, the
// reason a copy carries), and when it tries again: on a fake clock, so each instant is exact.

/** An in-memory broker whose declarations, or publishes to a queue, can be made to fail. */
class FlakyDeclares extends InMemoryTransport {
  failDeclares = 0
  /** Publishes routed to these queues fail with this error (once each, then pass). */
  readonly failPublishes = new Map<string, Error>()
  /** Headers of every publish, by routing key. */
  readonly headersTo: [string, Record<string, unknown>][] = []

  /** Subscriptions fail this many more times. */
  failConsumes = 0
  consumes = 0

  override async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    this.consumes++
    if (this.failConsumes > 0) {
      this.failConsumes--
      throw new Error('the broker refused the subscription')
    }
    return super.consume(queue, options, onDelivery)
  }

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    this.headersTo.push([message.routingKey, { ...message.headers }])
    const failure = this.failPublishes.get(message.routingKey)
    if (failure !== undefined) {
      this.failPublishes.delete(message.routingKey)
      throw failure
    }
    await super.publish(message, options)
  }

  override async declare(declarations: readonly Declaration[]): Promise<void> {
    if (this.failDeclares > 0) {
      this.failDeclares--
      throw new Error('the broker refused the declaration')
    }
    await super.declare(declarations)
  }
}

describe('what the consumer reports (fake clock)', () => {
  let transport: FlakyDeclares
  let mq: AceMq
  let reported: [string, string][]

  beforeEach(async () => {
    useFakeClock()
    transport = new FlakyDeclares()
    reported = []
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([context, String(error)]),
    })
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  /** The reason (`x-acemq-error`) of the oldest message on `queue`, taken off it. */
  function reasonOn(queue: string): string | undefined {
    const message = transport.get(queue)
    if (message === undefined) throw new Error(`nothing on ${queue}`)
    return readEnvelope(message.headers, {
      messageId: message.properties.messageId,
      routingKey: queue,
    }).envelope.error
  }

  /** A consumer of `queue` that dead-letters everything, its dead-letter queue then deleted. */
  async function deadLetterToDeletedQueue(queue: string): Promise<void> {
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    await mq.consume(queue, ConsumerOptions.defaults(), () => {
      throw new FatalError('poison')
    })
    transport.deleteQueue(`${queue}.dlq`)
    await mq.publisher('', queue).send({}, { id: 'm-1' })
  }

  it('holds a copy its dead-letter queue no longer routes, says so, declares the queue again and moves it at once', async () => {
    await deadLetterToDeletedQueue('gone')
    await run()
    expect(reported.map(([context]) => context)).toEqual([
      "could not move message m-1 to 'gone.dlq' (try 1); it is held and tried again",
    ])
    // Routed at the next tick of the in-memory broker, not after a backoff.
    await run(1)
    expect(transport.messageCount('gone.dlq')).toBe(1)
    expect(reasonOn('gone.dlq')).toBe('poison')
    expect(transport.messageCount('gone')).toBe(0)
    expect((await mq.health()).status).toBe('UP')
  })

  it('when declaring the queue again fails too, says so and tries the move again after 1 s, then 2 s', async () => {
    await deadLetterToDeletedQueue('gone-twice')
    transport.failDeclares = 2
    await run()
    expect(reported.map(([context]) => context)).toEqual([
      "could not move message m-1 to 'gone-twice.dlq' (try 1); it is held and tried again",
      "could not declare 'gone-twice.dlq' again",
    ])
    expect(reported[1]?.[1]).toMatch(/refused the declaration/)
    // Held while the move is being tried again: DEGRADED, naming the queue it cannot reach.
    const health = await mq.health()
    expect(health.status).toBe('DEGRADED')
    expect(JSON.stringify(health)).toContain('"failingMoves":"gone-twice -> gone-twice.dlq"')
    await run(999)
    expect(reported).toHaveLength(2)
    await run(1)
    expect(reported.map(([context]) => context).slice(2)).toEqual([
      "could not move message m-1 to 'gone-twice.dlq' (try 2); it is held and tried again",
      "could not declare 'gone-twice.dlq' again",
    ])
    await run(1_999)
    expect(reported).toHaveLength(4)
    expect(transport.messageCount('gone-twice.dlq')).toBe(0)
    await run(1)
    // The third try declares it (the broker accepts again) and moves it at once.
    expect(reported.map(([context]) => context).slice(4)).toEqual([
      "could not move message m-1 to 'gone-twice.dlq' (try 3); it is held and tried again",
    ])
    await run(1)
    expect(transport.messageCount('gone-twice.dlq')).toBe(1)
    expect((await mq.health()).status).toBe('UP')
  })

  it('parks a message whose content type no codec reads, saying which type', async () => {
    await mq.applyTopology(Topology.define().queueWithDeadLetter('typed'))
    let calls = 0
    await mq.consume('typed', ConsumerOptions.defaults(), () => {
      calls++
    })
    await transport.publish({
      exchange: '',
      routingKey: 'typed',
      body: new TextEncoder().encode('<order/>'),
      headers: {},
      properties: { contentType: 'application/x-unknown', messageId: 'xml-1' },
      persistent: true,
      mandatory: true,
    })
    await run()
    expect(calls).toBe(0)
    expect(reasonOn('typed.parked')).toBe(
      "could not decode: no codec for content type 'application/x-unknown'",
    )
    expect(transport.messageCount('typed')).toBe(0)
  })

  it('reports a lost channel of its subscription, naming the queue', async () => {
    await mq.applyTopology(Topology.define().queueWithDeadLetter('lossy'))
    await mq.consume('lossy', ConsumerOptions.defaults(), () => undefined)
    transport.closeChannel('lossy', 'PRECONDITION_FAILED - unknown delivery tag 7')
    await run()
    expect(reported).toEqual([
      [
        "the consumer on 'lossy' lost its channel; the transport subscribes again",
        expect.stringContaining('unknown delivery tag 7'),
      ],
    ])
  })

  it('parks a copy that can never be written as it is, without its application headers, saying why', async () => {
    await mq.applyTopology(Topology.define().queueWithDeadLetter('unwritable'))
    await mq.consume('unwritable', ConsumerOptions.defaults(), () => {
      throw new FatalError('poison')
    })
    transport.failPublishes.set(
      'unwritable.dlq',
      new AceMqError('a header value cannot be encoded', { code: ErrorCodes.UNENCODABLE }),
    )
    await mq.publisher('', 'unwritable').send({}, { id: 'm-2', headers: { 'x-app': 'kept?' } })
    await run(1)
    expect(transport.messageCount('unwritable.dlq')).toBe(0)
    expect(reasonOn('unwritable.parked')).toBe(
      "could not republish to 'unwritable.dlq' as it is (a header value cannot be encoded); its application headers were dropped: poison",
    )
    const [, parkedHeaders] = transport.headersTo.find(([key]) => key === 'unwritable.parked') ?? []
    expect(parkedHeaders).toBeDefined()
    expect(parkedHeaders).not.toHaveProperty('x-app')
    const [, triedHeaders] = transport.headersTo.find(([key]) => key === 'unwritable.dlq') ?? []
    expect(triedHeaders).toHaveProperty('x-app', 'kept?')
    // Not tried again, so no failure is reported: only where the message landed.
    expect(reported.map(([context]) => context)).toEqual([
      "message m-2 from 'unwritable' was moved to 'unwritable.parked' (parked)",
    ])
  })

  it('parks a message whose id the idempotency store refuses, saying so, without running the handler', async () => {
    await mq.applyTopology(Topology.define().queueWithDeadLetter('refused'))
    const inner = new InMemoryIdempotencyStore()
    const store: ClaimingIdempotencyStore = {
      tryClaim: async () => {
        throw new AceMqError('ids are at most 8 characters here', {
          code: ErrorCodes.CONFIGURATION,
        })
      },
      claim: (id, owner) => inner.claim(id, owner),
      confirm: (id, owner) => inner.confirm(id, owner),
      release: (id, owner) => inner.release(id, owner),
      isConfirmed: (id) => inner.isConfirmed(id),
    }
    let calls = 0
    await mq.consume('refused', ConsumerOptions.defaults().idempotent(store), () => {
      calls++
    })
    await mq.publisher('', 'refused').send({}, { id: 'a-long-message-id' })
    await run(1)
    expect(calls).toBe(0)
    expect(reasonOn('refused.parked')).toBe(
      'the idempotency store refused the message id: ids are at most 8 characters here',
    )
    expect(transport.messageCount('refused')).toBe(0)
    expect(reported).toEqual([
      [
        "message a-long-message-id from 'refused' was moved to 'refused.parked' (parked)",
        'AceMqError: the idempotency store refused the message id: ids are at most 8 characters here',
      ],
    ])
  })

  it('after letting go during a long pause, subscribes again on resume, trying again after 1 s, then 2 s, and says so', async () => {
    await mq.applyTopology(Topology.define().queueWithDeadLetter('paused'))
    const handled: number[] = []
    await mq.consume('paused', ConsumerOptions.defaults().withHeldTimeout('10s'), () => {
      handled.push(Date.now() - START)
    })
    expect(transport.consumes).toBe(1)
    mq.pauseConsuming()
    await mq.publisher('', 'paused').send({}, { id: 'm-3' })
    await run()
    expect(mq.held).toBe(1)
    await run(10_000)
    // Let go: the held delivery is back on the queue, the subscription cancelled.
    expect(mq.held).toBe(0)
    expect(transport.messageCount('paused')).toBe(1)
    transport.failConsumes = 2
    mq.resumeConsuming()
    await run()
    expect(transport.consumes).toBe(2)
    expect(reported.map(([context]) => context)).toEqual([
      "could not subscribe to 'paused' again after a pause (will retry)",
    ])
    await run(999)
    expect(transport.consumes).toBe(2)
    await run(1)
    expect(transport.consumes).toBe(3)
    expect(reported).toHaveLength(2)
    await run(1_999)
    expect(transport.consumes).toBe(3)
    expect(handled).toEqual([])
    await run(1)
    expect(transport.consumes).toBe(4)
    await run(1)
    expect(reported).toHaveLength(2)
    // Subscribed at 13 s; the in-memory broker delivers at its next tick.
    expect(handled).toEqual([13_001])
  })
})
