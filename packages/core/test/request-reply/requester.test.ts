import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  ErrorCodes,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  Topology,
  errorCodeOf,
  type Instrumentation,
} from '../../src/index.js'
import { REPLY_TO_HEADER, type RequestSettledInfo } from '../../src/spi.js'

describe('a requester on the in-memory transport', () => {
  let transport: InMemoryTransport
  let mq: AceMq

  beforeEach(async () => {
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
    await mq.applyTopology(Topology.define().queueWithDeadLetter('quotes'))
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  it('settles every waiting request at once when the connection is lost, not at its timeout', async () => {
    const requester = mq.requester({ timeout: '1m' })
    const waiting = [1, 2, 3].map((n) =>
      requester.request('', 'quotes', n).then(
        () => undefined,
        (error: unknown) => error,
      ),
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(requester.waiting).toBe(3)
    const started = Date.now()
    await transport.simulateConnectionLoss(10)
    const errors = await Promise.all(waiting)
    expect(Date.now() - started).toBeLessThan(1_000)
    for (const error of errors) {
      expect(errorCodeOf(error)).toBe(ErrorCodes.CONNECTION_DOWN)
      expect(String(error)).toMatch(/connection was lost while the request waited/)
    }
    expect(requester.failed).toBe(3)
  })

  it('reports each outcome to the instrumentation, the responder’s too', async () => {
    const seen: RequestSettledInfo[] = []
    const instrumentation: Instrumentation = {
      publishStarted: () => undefined,
      processStarted: () => undefined,
      requestSettled: (info) => seen.push(info),
    }
    // Installed after both exist: they read the connection's instrumentation when they count.
    const requester = mq.requester()
    const responder = await mq.respond<number, number>('quotes', {}, (m) => m.payload + 1)
    mq.setInstrumentation(instrumentation)
    expect(await requester.request('', 'quotes', 1)).toBe(2)
    await expect(requester.request('', 'nowhere', 1)).rejects.toThrow(/nowhere/)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(seen).toContainEqual(
      expect.objectContaining({ role: 'requester', outcome: 'answered', destination: '/quotes' }),
    )
    expect(seen).toContainEqual({ role: 'requester', outcome: 'failed', destination: '/nowhere' })
    expect(seen).toContainEqual({ role: 'responder', outcome: 'answered', destination: 'quotes' })
    await responder.close()
    await requester.close()
    await expect(requester.request('', 'quotes', 1)).rejects.toThrow(/requester is closed/)
  })

  it('declares its reply queue acemq.reply.{uuid}, classic, with x-expires of 10 minutes', async () => {
    const recorded: unknown[] = []
    const declare = transport.declare.bind(transport)
    transport.declare = async (declarations) => {
      recorded.push(...declarations)
      await declare(declarations)
    }
    const requester = mq.requester()
    await mq.respond('quotes', {}, () => 'ok')
    await requester.request('', 'quotes', 1)
    expect(requester.replyQueue).toMatch(/^acemq\.reply\.[0-9a-f-]{36}$/)
    expect(recorded).toContainEqual({
      kind: 'queue',
      name: requester.replyQueue,
      type: 'classic',
      durable: true,
      arguments: { 'x-expires': 600_000 },
    })
  })

  it('an idempotent responder runs a redelivered request once and does not answer it again', async () => {
    let handled = 0
    const responder = await mq.respond<number, number>(
      'quotes',
      { consumer: ConsumerOptions.defaults().idempotent(InMemoryIdempotencyStore.forOneDay()) },
      (m) => {
        handled++
        return m.payload + 1
      },
    )
    const requester = mq.requester()
    expect(await requester.request('', 'quotes', 1, { id: 'quote-1' })).toBe(2)
    await transport.publish({
      exchange: '',
      routingKey: 'quotes',
      body: Buffer.from('1'),
      headers: { 'x-acemq-id': 'quote-1', [REPLY_TO_HEADER]: requester.replyQueue },
      properties: { contentType: 'application/json', messageId: 'quote-1' },
      persistent: true,
      mandatory: true,
    })
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(transport.messageCount('quotes')).toBe(0)
    expect(handled).toBe(1)
    expect(responder.answered).toBe(1)
    expect(requester.unmatched).toBe(0)
  })
})
