import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Ack, AceMq, type Handler, type Instrumentation } from '../../src/index.js'
import { readEnvelope, type OrderedConsumer } from '../../src/spi.js'
import { closeOnFakeClock, run, useFakeClock } from './fake-clock.js'
import { ManualDelivery, ManualTransport } from './manual-transport.js'

// The engine under an ordered queue's partition (one delivery at a time, a failure run again in
// place, never put back behind the messages after it), driven by hand on a fake clock: the
// transport may hand over more than the prefetch allows, as a redelivery can.

describe('an ordered partition’s consumer (driven by hand, fake clock)', () => {
  let transport: ManualTransport
  let mq: AceMq
  let retried: [string, number, boolean][]

  const instrumentation: Instrumentation = {
    publishStarted: () => undefined,
    processStarted: (info) => ({
      run: (fn) => fn(),
      handled: () => undefined,
      retried: (delayMs, inBroker) => retried.push([info.messageId, delayMs, inBroker]),
      setAside: () => undefined,
      end: () => undefined,
    }),
  }

  beforeEach(async () => {
    useFakeClock()
    transport = new ManualTransport()
    retried = []
    mq = await AceMq.connect(transport)
    mq.setInstrumentation(instrumentation)
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  async function consumeOrdered(
    mode: 'stop' | 'skip',
    attempts: number,
    handler: Handler<unknown>,
  ): Promise<OrderedConsumer> {
    const ordered = await mq
      .ordered('o')
      .partitions(1)
      .onFailure(mode, { attempts, delay: '1s' })
      .declare()
    return ordered.consume(handler)
  }

  function deliver(id: string): ManualDelivery {
    return transport.current.deliver(new ManualDelivery(id, { queue: 'o.0' }))
  }

  it('runs a failed message again in place after the delay, running nothing behind it meanwhile', async () => {
    const runs: string[] = []
    const failOnce = new Set(['m1'])
    await consumeOrdered('stop', 3, (message) => {
      runs.push(message.envelope.id)
      if (failOnce.delete(message.envelope.id)) throw new Error('not yet')
    })
    mq.pauseConsuming()
    const m1 = deliver('m1')
    const m2 = deliver('m2')
    mq.resumeConsuming()
    await run()
    expect(runs).toEqual(['m1'])
    expect(m1.settlements).toEqual([])
    expect(mq.waiting).toBe(1)
    await run(999)
    expect(runs).toEqual(['m1'])
    await run(1)
    expect(runs).toEqual(['m1', 'm1', 'm2'])
    expect(m1.settlements).toEqual(['ack'])
    expect(m2.settlements).toEqual(['ack'])
    // Run again in place: no copy was written anywhere.
    expect(transport.published).toEqual([])
    expect(retried).toEqual([['m1', 1_000, false]])
  })

  it('acks a message its synchronous handler accepts before the transport’s delivery callback returns', async () => {
    await consumeOrdered('stop', 3, () => undefined)
    const m1 = deliver('m1')
    expect(m1.settlements).toEqual(['ack'])
    expect(mq.inFlight).toBe(0)
  })

  it('runs a released message again in place, and skips it with the reason once its attempts are spent', async () => {
    let runs = 0
    await consumeOrdered('skip', 2, () => {
      runs++
      return Ack.release()
    })
    const m1 = deliver('m1')
    await run()
    expect(runs).toBe(1)
    expect(m1.settlements).toEqual([])
    await run(1_000)
    expect(runs).toBe(2)
    expect(m1.settlements).toEqual(['ack'])
    const copy = transport.get('o.0.dlq')
    expect(copy).toBeDefined()
    const { envelope } = readEnvelope(copy?.headers ?? {}, {
      messageId: copy?.properties.messageId,
      routingKey: 'o.0.dlq',
    })
    expect(envelope.error).toBe('gave up after 2 attempt(s): released by the handler')
    expect(transport.messageCount('o.0')).toBe(0)
  })

  it('writes nothing for a run again in place that the close gave up on', async () => {
    let runs = 0
    let finish!: () => void
    const stuck = new Promise<void>((resolve) => (finish = resolve))
    const consumer = await consumeOrdered('stop', 3, async () => {
      if (++runs === 1) throw new Error('not yet')
      await stuck
    })
    const m1 = deliver('m1')
    await run(1_000)
    expect(runs).toBe(2)
    const closing = consumer.close({ drainTimeout: 0 })
    await run(5_000)
    await closing
    finish()
    await run()
    expect(m1.settlements).toEqual([])
    expect(transport.published).toEqual([])
  })

  it('never lets go of its subscription during a long pause', async () => {
    const runs: string[] = []
    await consumeOrdered('stop', 3, (message) => {
      runs.push(message.envelope.id)
    })
    const sub = transport.current
    mq.pauseConsuming()
    const m1 = deliver('m1')
    await run(10 * 60_000)
    expect(m1.settlements).toEqual([])
    expect(sub.cancels).toBe(0)
    expect(sub.closes).toBe(0)
    mq.resumeConsuming()
    await run()
    expect(runs).toEqual(['m1'])
    expect(m1.settlements).toEqual(['ack'])
    expect(transport.subscriptions).toHaveLength(1)
  })

  it('closes by closing its channel, never by a cancel, and leaves what it holds or receives to that close', async () => {
    const runs: string[] = []
    const consumer = await consumeOrdered('stop', 3, (message) => {
      runs.push(message.envelope.id)
    })
    const sub = transport.current
    mq.pauseConsuming()
    const held = deliver('held')
    await consumer.close()
    expect(sub.cancels).toBe(0)
    expect(sub.closes).toBe(1)
    expect(held.settlements).toEqual([])
    const late = deliver('late')
    expect(late.settlements).toEqual([])
    expect(runs).toEqual([])
  })
})
