import { describe, expect, it, vi } from 'vitest'
import {
  AceMq,
  AceMqError,
  ClosedError,
  ConfigurationError,
  ConnectionBlockedError,
  ConsumerOptions,
  ErrorCodes,
  FatalError,
  InMemoryIdempotencyStore,
  InMemoryOutboxStore,
  InMemoryTransport,
  OutboxRecord,
  PublishFailedError,
  PublishingPausedError,
  RetryPolicy,
  Topology,
  UnroutableError,
  errorCodeOf,
  type ClaimResult,
  type ErrorCode,
} from '../src/index.js'
import {
  isErrorCode,
  readEnvelope,
  type OutgoingMessage,
  type TransportPublishOptions,
} from '../src/spi.js'

/**
 * What another installed copy of `@acemq/core` throws: classes of its own (so `instanceof`
 * against this copy's classes is false), with the same codes and names.
 */
class OtherCopyError extends Error {
  constructor(
    message: string,
    readonly code: string,
    name: string,
  ) {
    super(message)
    this.name = name
  }
}

describe('the closed set of error codes', () => {
  it('names every code once, each constant holding ACEMQ_ and its own name', () => {
    const entries = Object.entries(ErrorCodes)
    expect(entries.length).toBeGreaterThan(20)
    for (const [name, code] of entries) expect(code).toBe(`ACEMQ_${name}`)
    expect(new Set(Object.values(ErrorCodes)).size).toBe(entries.length)
    expect(Object.isFrozen(ErrorCodes)).toBe(true)
  })

  it('gives every error class a code of the set', () => {
    const errors: AceMqError[] = [
      new AceMqError('boom'),
      new PublishingPausedError('orders', 'placed'),
      new ConnectionBlockedError('low on memory'),
      new UnroutableError('', 'nowhere'),
      new PublishFailedError('nacked'),
      new FatalError('bad order'),
      new ConfigurationError('bad option'),
      new ClosedError(),
    ]
    for (const error of errors) expect(isErrorCode(error.code), error.name).toBe(true)
  })

  it('tells a code of the set from any other value', () => {
    expect(isErrorCode('ACEMQ_NOT_FOUND')).toBe(true)
    expect(isErrorCode('ACEMQ_NO_SUCH_CODE')).toBe(false)
    expect(isErrorCode('ECONNRESET')).toBe(false)
    expect(isErrorCode(404)).toBe(false)
    expect(isErrorCode(undefined)).toBe(false)
  })

  it('reads the code of an error from any copy of AceMQ, and of nothing else', () => {
    const code: ErrorCode | undefined = errorCodeOf(new FatalError('x'))
    expect(code).toBe(ErrorCodes.FATAL)
    expect(errorCodeOf(new OtherCopyError('gone', 'ACEMQ_NOT_FOUND', 'AceMqError'))).toBe(
      ErrorCodes.NOT_FOUND,
    )
    expect(errorCodeOf({ code: 'ACEMQ_CLOSED', message: 'closed' })).toBe(ErrorCodes.CLOSED)
    expect(errorCodeOf(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBeUndefined()
    expect(errorCodeOf(new Error('plain'))).toBeUndefined()
    expect(errorCodeOf('ACEMQ_FATAL')).toBeUndefined()
    expect(errorCodeOf(null)).toBeUndefined()
  })
})

describe('an error from another copy of @acemq/core is treated as this copy’s own', () => {
  const policy = RetryPolicy.fixed(5, '10ms')

  async function consumeOnce(
    queue: string,
    thrown: unknown,
  ): Promise<{ transport: InMemoryTransport; calls: () => number; close: () => Promise<void> }> {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
    let calls = 0
    await mq.consume(queue, ConsumerOptions.defaults().withRetry(policy), () => {
      calls++
      throw thrown
    })
    await mq.publisher('', queue).send({ id: 1 })
    return { transport, calls: () => calls, close: () => mq.close({ drainTimeout: 0 }) }
  }

  it.each([
    [
      'a FatalError class of its own',
      new OtherCopyError('no customer', 'ACEMQ_FATAL', 'FatalError'),
    ],
    ['a plain object with the code', { code: 'ACEMQ_FATAL', message: 'no customer' }],
  ])(
    'a handler that throws %s sends the message to .dlq at once, never retried',
    async (_what, thrown) => {
      const queue = `foreign-fatal-${Math.random().toString(36).slice(2)}`
      const { transport, calls, close } = await consumeOnce(queue, thrown)
      try {
        await vi.waitFor(() => expect(transport.messageCount(`${queue}.dlq`)).toBe(1), {
          timeout: 5_000,
        })
        expect(calls()).toBe(1)
        const copy = transport.get(`${queue}.dlq`)
        const { envelope } = readEnvelope(copy?.headers, { routingKey: queue })
        expect(envelope.error).toContain('no customer')
      } finally {
        await close()
      }
    },
  )

  it('a store that refuses the message id with a ConfigurationError of its own parks the message', async () => {
    class RefusingStore extends InMemoryIdempotencyStore {
      override async tryClaim(): Promise<ClaimResult> {
        throw new OtherCopyError('id too long', 'ACEMQ_CONFIGURATION', 'ConfigurationError')
      }
    }
    const queue = `foreign-config-${Math.random().toString(36).slice(2)}`
    const transport = new InMemoryTransport()
    await using mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))
    let calls = 0
    const options = ConsumerOptions.defaults().withRetry(policy).idempotent(new RefusingStore())
    await mq.consume(queue, options, () => {
      calls++
    })
    await mq.publisher('', queue).send({ id: 1 })
    await vi.waitFor(() => expect(transport.messageCount(`${queue}.parked`)).toBe(1), {
      timeout: 5_000,
    })
    expect(calls).toBe(0)
  })

  it('the outbox relay hands back a record whose publish was refused by another copy’s ConnectionBlockedError, without counting an attempt', async () => {
    const blocked = new OtherCopyError(
      'the broker has blocked the connection (low on memory): the publish was refused',
      'ACEMQ_CONNECTION_BLOCKED',
      'ConnectionBlockedError',
    )
    class BlockedTransport extends InMemoryTransport {
      override async publish(
        _message: OutgoingMessage,
        _options?: TransportPublishOptions,
      ): Promise<void> {
        throw blocked
      }
    }
    const transport = new BlockedTransport()
    await using mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queue('orders.placed'))
    const store = new InMemoryOutboxStore()
    await store.add(OutboxRecord.of('', 'orders.placed', { id: 'o-1' }, { id: 'order-o-1' }))
    const relay = mq.outbox(store)
    // Connection trouble stalls the round: drainOnce says so, and the record is not at fault.
    const stalled = await relay.drainOnce().then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(errorCodeOf(stalled)).toBe(ErrorCodes.CLOSED)
    expect((stalled as Error).message).toContain('the broker has blocked the connection')
    expect(relay.failed).toBe(0)
    expect(await store.pendingCount()).toBe(1)
    const [pending] = await store.claimBatch(1, 60_000)
    expect(pending?.attempts).toBe(0)
  })
})
