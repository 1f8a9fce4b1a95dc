import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ErrorCodes,
  InMemoryIdempotencyStore,
  PublishFailedError,
  InMemoryTransport,
} from '../../src/index.js'
import {
  type Declaration,
  type Delivery,
  type OutgoingMessage,
  type TransportConsumeOptions,
  type TransportPublishOptions,
  type TransportSubscription,
} from '../../src/spi.js'
import { eventually } from '@acemq/testing'

// A pipeline hop's order (docs/design.md §15): the next step's message confirmed, then the
// step's claim confirmed, then its delivery acked — pinned where the hop fails once and where
// the step's channel is lost right after the hop.

/** What happened, in order: hops published or failed, claims confirmed, deliveries acked. */
type Events = string[]

/** An in-memory broker that records publishes and acks, and can fail a hop or drop a channel. */
class OrderTransport extends InMemoryTransport {
  constructor(readonly events: Events) {
    super()
  }

  /** Runs before a hop to step `second` is published: what it throws fails the publish. */
  beforeHop: (() => void) | undefined
  /** Runs once a hop to step `second` is confirmed, before the engine hears of it. */
  afterHop: (() => void) | undefined

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    const hop = message.routingKey === 'second'
    if (hop) {
      try {
        this.beforeHop?.()
      } catch (error) {
        this.events.push('hop failed')
        throw error
      }
    }
    await super.publish(message, options)
    if (hop) {
      this.events.push('hop confirmed')
      this.afterHop?.()
    }
  }

  readonly declared: Declaration[][] = []

  override async declare(declarations: readonly Declaration[]): Promise<void> {
    this.declared.push([...declarations])
    await super.declare(declarations)
  }

  override consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    const events = this.events
    return super.consume(queue, options, (delivery) =>
      onDelivery(
        new Proxy(delivery, {
          get(target, property) {
            if (property === 'ack') {
              return () => {
                const acked = target.ack()
                events.push(`ack ${queue}${acked ? '' : ' (channel gone)'}`)
                return acked
              }
            }
            const value: unknown = Reflect.get(target, property, target)
            return typeof value === 'function'
              ? (value as (...args: unknown[]) => unknown).bind(target)
              : value
          },
        }),
      ),
    )
  }
}

/** A store that records each confirm. */
class OrderStore extends InMemoryIdempotencyStore {
  constructor(readonly events: Events) {
    super({ retention: '1d' })
  }

  override async confirm(id: string, owner?: string): Promise<void> {
    await super.confirm(id, owner)
    this.events.push(`confirm ${id}`)
  }
}

describe('the order of a pipeline hop', () => {
  let events: Events
  let transport: OrderTransport
  let store: OrderStore
  let mq: AceMq
  const ran: string[] = []

  beforeEach(async () => {
    events = []
    ran.length = 0
    transport = new OrderTransport(events)
    store = new OrderStore(events)
    mq = await AceMq.connect(transport, { onError: () => undefined })
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  function build() {
    return mq
      .pipeline<{ n: number }>('p')
      .step('first', (payload) => {
        ran.push('first')
        return payload
      })
      .step('second', () => {
        ran.push('second')
        return null
      })
      .idempotent(store)
      .build()
  }

  it('confirms the claim and acks the step only after the hop that failed once is published again and confirmed', async () => {
    let failures = 1
    transport.beforeHop = () => {
      if (failures-- > 0) throw new Error('the broker is busy')
    }
    const pipeline = await build()
    await pipeline.send({ n: 1 }, { id: 'run-1' })
    await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
    expect(events.filter((e) => !e.endsWith('p.second') && !e.endsWith('p.second:run-1'))).toEqual([
      'hop failed',
      'hop confirmed',
      'confirm p.first:run-1',
      'ack p.first',
    ])
    expect(ran).toEqual(['first', 'second'])
  })

  it('hands the step back when its channel is lost right after the hop, and the redelivery finds the claim confirmed: each step runs once', async () => {
    transport.afterHop = () => {
      transport.afterHop = undefined
      transport.closeChannel('p.first', 'lost right after the hop')
    }
    const pipeline = await build()
    await pipeline.send({ n: 1 }, { id: 'run-2' })
    await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
    await eventually(
      () => transport.messageCount('p.first') + transport.unackedCount('p.first') === 0,
      5_000,
      'the step acked',
    )
    // The hop first, then the claim, then the ack — which the lost channel refuses; the
    // redelivery finds the claim confirmed and is acked as a duplicate, without running.
    expect(events.filter((e) => !e.endsWith('p.second') && !e.endsWith('p.second:run-2'))).toEqual([
      'hop confirmed',
      'confirm p.first:run-2',
      'ack p.first (channel gone)',
      'ack p.first',
    ])
    expect(ran).toEqual(['first', 'second'])
    expect([pipeline.completed, pipeline.endedEarly]).toEqual([1, 0])
  })

  it("declares the pipeline's exchange and the step's queue and binding again when a hop finds the exchange gone, and delivers the hop at once", async () => {
    const pipeline = await build()
    let failures = 1
    transport.beforeHop = () => {
      if (failures-- > 0) {
        throw new PublishFailedError("no exchange 'p' (NOT_FOUND)", {
          code: ErrorCodes.EXCHANGE_NOT_FOUND,
        })
      }
    }
    transport.declared.length = 0
    const sent = Date.now()
    await pipeline.send({ n: 1 }, { id: 'run-3' })
    await eventually(() => pipeline.completed === 1, 5_000, 'the run completed')
    // Declared again, then published at once rather than after the 1 s backoff.
    expect(Date.now() - sent).toBeLessThan(900)
    expect(transport.declared.flat()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'exchange', name: 'p', type: 'direct', durable: true }),
        expect.objectContaining({ kind: 'queue', name: 'p.second' }),
        expect.objectContaining({
          kind: 'binding',
          queue: 'p.second',
          exchange: 'p',
          routingKey: 'second',
        }),
      ]),
    )
    expect(ran).toEqual(['first', 'second'])
  })
})
