import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  AceMqError,
  ErrorCodes,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  type IdempotencyStore,
} from '../../src/index.js'
import { readEnvelope, type OutgoingMessage, type TransportPublishOptions } from '../../src/spi.js'
import { closeOnFakeClock, run, useFakeClock } from './fake-clock.js'

// A pipeline step's consumer publishing the next step's message (the hop): what it does when
// that publish fails for a while, or can never succeed as it is. In-memory broker, fake clock.

/** An in-memory broker whose publishes a test can watch and fail. */
class HopTransport extends InMemoryTransport {
  readonly published: { message: OutgoingMessage; options: TransportPublishOptions | undefined }[] =
    []
  /** Runs before each publish: what it throws fails the publish. */
  beforePublish: ((message: OutgoingMessage) => void) | undefined

  override async publish(
    message: OutgoingMessage,
    options?: TransportPublishOptions,
  ): Promise<void> {
    this.published.push({ message, options })
    this.beforePublish?.(message)
    await super.publish(message, options)
  }
}

describe('a pipeline step’s hop to the next step (fake clock)', () => {
  let transport: HopTransport
  let mq: AceMq
  let reported: [string, unknown][]

  beforeEach(async () => {
    useFakeClock()
    transport = new HopTransport()
    reported = []
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([context, error]),
    })
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  /** Hops to `p.second` fail with each of `failures` in turn, then go through. */
  function failHops(...failures: Error[]): void {
    transport.beforePublish = (message) => {
      if (message.routingKey !== 'second') return
      const failure = failures.shift()
      if (failure !== undefined) throw failure
    }
  }

  it('is held and published again after 1 s when it fails, reporting the failure, and the next step runs once', async () => {
    const seen: string[] = []
    const pipeline = await mq
      .pipeline<{ n: number }>('p')
      .step('first', (payload) => {
        seen.push('first')
        return payload
      })
      .step('second', () => {
        seen.push('second')
        return null
      })
      .build()
    failHops(new Error('the broker is busy'))
    const id = await pipeline.send({ n: 1 })
    await run()
    expect(seen).toEqual(['first'])
    expect(reported.map(([context, error]) => [context, String(error)])).toEqual([
      [
        `could not move message ${id} to 'p.second' (try 1); it is held and tried again`,
        'Error: the broker is busy',
      ],
    ])
    const health = JSON.stringify(await mq.health())
    expect(health).toContain('"failingMoves":"p.first -> p.second"')
    await run(999)
    expect(seen).toEqual(['first'])
    await run(1)
    await run(1)
    expect(seen).toEqual(['first', 'second'])
    expect(transport.messageCount('p.first')).toBe(0)
    expect(transport.messageCount('p.second')).toBe(0)
    const hops = transport.published.filter((p) => p.message.routingKey === 'second')
    expect(hops).toHaveLength(2)
    for (const hop of hops) {
      expect(hop.options).toMatchObject({ whenBlocked: 'wait', lane: 'engine' })
      expect(hop.options?.signal).toBeInstanceOf(AbortSignal)
    }
  })

  it('that can never be written as it is parks the step’s message with the reason, and gives its claim back', async () => {
    const store = new InMemoryIdempotencyStore({ now: () => Date.now() })
    const seen: string[] = []
    const pipeline = await mq
      .pipeline<{ n: number }>('p')
      .step('first', (payload) => {
        seen.push('first')
        return payload
      })
      .step('second', () => {
        seen.push('second')
        return null
      })
      .idempotent(store)
      .build()
    failHops(new AceMqError('a header cannot be encoded', { code: ErrorCodes.UNENCODABLE }))
    const id = await pipeline.send({ n: 1 })
    await run(1)
    expect(seen).toEqual(['first'])
    const parked = transport.get('p.first.parked')
    expect(parked).toBeDefined()
    const { envelope } = readEnvelope(parked?.headers ?? {}, {
      messageId: parked?.properties.messageId,
      routingKey: 'p.first.parked',
    })
    expect(envelope.id).toBe(id)
    expect(envelope.error).toBe(
      "could not publish the next step's message to 'p.second': a header cannot be encoded",
    )
    expect(transport.messageCount('p.first')).toBe(0)
    // Parked at once, not tried again: only where the message landed is reported.
    expect(reported.map(([context]) => context)).toEqual([
      `message ${id} from 'p.first' was moved to 'p.first.parked' (parked)`,
    ])
    // Released: the step's claim on the run is free for whoever replays the parked message.
    expect(await store.tryClaim(`first:${id}`, 'someone-else')).toBe('claimed')
    await run(10_000)
    expect(seen).toEqual(['first'])
  })

  it('neither acks nor counts a step the close gave up on while its claim was being confirmed', async () => {
    const inner = new InMemoryIdempotencyStore({ now: () => Date.now() })
    let confirm!: () => void
    const confirming = new Promise<void>((resolve) => (confirm = resolve))
    const store: IdempotencyStore = {
      claim: (id, owner) => inner.claim(id, owner),
      confirm: async (id, owner) => {
        await confirming
        await inner.confirm(id, owner)
      },
      release: (id, owner) => inner.release(id, owner),
      isConfirmed: (id) => inner.isConfirmed(id),
    }
    const pipeline = await mq
      .pipeline<{ n: number }>('one')
      .step('only', (payload) => payload)
      .idempotent(store)
      .build()
    await pipeline.send({ n: 1 })
    await run(1)
    const closing = pipeline.close({ drainTimeout: 0 })
    await run(5_000)
    await closing
    confirm()
    await run()
    expect(pipeline.completed).toBe(0)
    // Back on its queue, as the closed channel left it.
    expect(transport.messageCount('one.only')).toBe(1)
  })
})
