import { describe, expect, it } from 'vitest'
import { Ack, AceMq, ConfigurationError, InMemoryTransport, type OrderedQueue } from '@acemq/core'
import {
  DEFAULT_ORDERED_ATTEMPTS,
  DEFAULT_ORDERED_RETRY_DELAY,
  DEFAULT_PARTITIONS,
  healthAnswer,
  readEnvelope,
} from '@acemq/core/spi'
import { eventually } from '@acemq/testing'

interface Entry {
  readonly account: string
  readonly seq: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function connect(): Promise<{ mq: AceMq; transport: InMemoryTransport }> {
  const transport = new InMemoryTransport()
  return { mq: await AceMq.connect(transport), transport }
}

function total(transport: InMemoryTransport, queue: OrderedQueue<unknown>): number {
  return queue.queues.reduce((sum, q) => sum + transport.messageCount(q), 0)
}

describe('an ordered queue’s builder', () => {
  it('refuses a partition count of 0, a fraction, more than 1024 or a string, at the call', async () => {
    await using mq = (await connect()).mq
    const builder = mq.ordered('ledger')
    for (const bad of [0, -1, 1.5, 1025, Number.NaN, '4' as unknown as number]) {
      expect(() => builder.partitions(bad)).toThrow(ConfigurationError)
    }
    expect(() => builder.partitions(0)).toThrow(
      'partitions(count) must be a whole number from 1 to 1024; got 0 (number)',
    )
    expect(() => builder.partitions(1.5)).toThrow(/got 1.5 \(number\)/)
    expect(() => builder.partitions(1025)).toThrow(/got 1025 \(number\)/)
    expect(() => builder.partitions('4' as unknown as number)).toThrow(/got "4"/)
    expect(builder.partitions(1).name).toBe('ledger')
    expect(builder.partitions(1024).name).toBe('ledger')
  })

  it('refuses a bad name, key function or failure setting, at the call', async () => {
    await using mq = (await connect()).mq
    expect(() => mq.ordered('')).toThrow(/ordered\(name\) must be a non-empty queue name/)
    expect(() => mq.ordered('amq.ledger')).toThrow(/must not start with 'amq\.'/)
    const builder = mq.ordered<Entry>('ledger')
    expect(() => builder.keyedBy('account' as unknown as (e: Entry) => string)).toThrow(
      'keyedBy(keyOf) must be a function from a payload to its key; got "account"',
    )
    expect(() => builder.onFailure('halt' as 'stop')).toThrow(
      `onFailure(mode) must be 'stop', 'retry-in-place' or 'skip'; got "halt"`,
    )
    expect(() => builder.onFailure('stop', { attempts: 0 })).toThrow(
      /onFailure\(options.attempts\) must be a whole number from 1 to 1000; got 0/,
    )
    expect(() => builder.onFailure('skip', { attempts: 2.5 })).toThrow(/got 2.5/)
    expect(() => builder.onFailure('skip', { delay: -1 })).toThrow(/onFailure\(options.delay\)/)
    expect(() => builder.onFailure('skip', { delay: '1 week' as '1d' })).toThrow(
      /onFailure\(options.delay\)/,
    )
  })

  it('is immutable: each call returns a new, frozen builder', async () => {
    await using mq = (await connect()).mq
    const builder = mq.ordered<Entry>('ledger')
    const eight = builder.partitions(8)
    expect(eight).not.toBe(builder)
    expect(Object.isFrozen(eight)).toBe(true)
    const [a, b] = await Promise.all([
      builder.declare(),
      mq.ordered<Entry>('ledger-8').partitions(8).declare(),
    ])
    expect(a.partitions).toBe(DEFAULT_PARTITIONS)
    expect(b.partitions).toBe(8)
  })

  it('defaults to 4 partitions and stop after 3 attempts 1 s apart', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq.ordered('ledger').declare()
    expect([ledger.partitions, ledger.failureMode, ledger.attempts, ledger.retryDelayMs]).toEqual([
      4,
      'stop',
      DEFAULT_ORDERED_ATTEMPTS,
      DEFAULT_ORDERED_RETRY_DELAY,
    ])
    expect([DEFAULT_ORDERED_ATTEMPTS, DEFAULT_ORDERED_RETRY_DELAY]).toEqual([3, 1_000])
  })

  it('refuses a name too long to carry its last partition’s dead-letter queue, declaring nothing', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const name = 'l'.repeat(248)
    await expect(mq.ordered(name).partitions(10).declare()).rejects.toThrow(
      /too long to carry its '\.parked' queue/,
    )
    expect(transport.hasQueue(`${name}.0`)).toBe(false)
  })

  it('declares each partition as a durable quorum queue with a single active consumer and its dead-letter and parked queues', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const ledger = await mq.ordered('ledger').partitions(2).declare()
    expect(ledger.queues).toEqual(['ledger.0', 'ledger.1'])
    for (const queue of ledger.queues) {
      expect(transport.queueInfo(queue)).toEqual({
        type: 'quorum',
        arguments: {
          'x-dead-letter-exchange': 'acemq.dlx',
          'x-dead-letter-routing-key': `${queue}.dlq`,
          'x-single-active-consumer': true,
        },
      })
      expect(transport.queueInfo(`${queue}.dlq`)?.type).toBe('classic')
      expect(transport.queueInfo(`${queue}.parked`)?.type).toBe('classic')
    }
  })

  it('refuses to declare the same ordered queue twice on one connection', async () => {
    await using mq = (await connect()).mq
    const first = await mq.ordered('ledger').declare()
    await expect(mq.ordered('ledger').declare()).rejects.toThrow(
      "ordered queue 'ledger' is already declared on this connection",
    )
    expect(mq.orderedQueues).toEqual([first])
  })
})

describe('an ordered queue', () => {
  it('names its partitions and refuses one that is not there', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq.ordered('ledger').partitions(3).declare()
    expect(ledger.queueFor(2)).toBe('ledger.2')
    expect(() => ledger.queueFor(3)).toThrow(
      "ordered queue 'ledger': queueFor(partition) must be a partition from 0 to 2; got 3 (number)",
    )
    expect(() => ledger.queueFor(-1)).toThrow(ConfigurationError)
    expect(() => ledger.queueFor(0.5)).toThrow(ConfigurationError)
    expect(() => ledger.resume(7)).toThrow(/resume\(partition\) must be a partition from 0 to 2/)
    expect(ledger.resume(1)).toBe(false)
    expect(ledger.haltedPartitions).toEqual([])
  })

  it('rejects a send whose key function throws, naming the queue, and sends nothing', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .keyedBy((entry) => entry.account.toUpperCase())
      .declare()
    const sent = ledger.send({ seq: 1 } as Entry)
    await expect(sent).rejects.toThrow(ConfigurationError)
    await expect(sent).rejects.toThrow(
      /^ordered queue 'ledger': its key function threw, so nothing was sent: Cannot read properties of undefined/,
    )
    await sent.catch((error: unknown) => expect((error as Error).cause).toBeInstanceOf(TypeError))
    expect(total(transport, ledger)).toBe(0)
  })

  it('rejects a send whose key is not a string, naming the queue and the value', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .keyedBy((entry) => entry.seq as unknown as string)
      .declare()
    await expect(ledger.send({ account: 'a', seq: 7 })).rejects.toThrow(
      "ordered queue 'ledger': its key function must return a string; got 7 (number), so nothing was sent",
    )
    const noKey = await mq
      .ordered<Entry>('nokey')
      .keyedBy(() => undefined as unknown as string)
      .declare()
    await expect(noKey.send({ account: 'a', seq: 1 })).rejects.toThrow(/got undefined/)
    const unkeyed = await mq.ordered<Entry>('unkeyed').declare()
    await expect(unkeyed.send({ account: 'a', seq: 1 })).rejects.toThrow(
      "ordered queue 'unkeyed' has no key function, so it cannot send",
    )
    expect(total(transport, ledger) + total(transport, noKey) + total(transport, unkeyed)).toBe(0)
  })

  it('sends to the key’s partition with the queue’s name as the message type, keeping send options', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(8)
      .keyedBy((e) => e.account)
      .declare()
    await ledger.send(
      { account: 'acct-7', seq: 1 },
      { id: 'e-1', correlation: 'c-1', headers: { 'x-tenant': 'acme' } },
    )
    const [stored] = transport.peek('ledger.6')
    const { envelope, headers } = readEnvelope(stored?.headers ?? {}, { routingKey: 'ledger.6' })
    expect([envelope.id, envelope.type, envelope.correlation]).toEqual(['e-1', 'ledger', 'c-1'])
    expect(headers['x-tenant']).toBe('acme')
    await ledger.send({ account: 'acct-7', seq: 2 }, { type: 'ledger.entry' })
    const second = transport.peek('ledger.6')[1]
    expect(readEnvelope(second?.headers ?? {}, { routingKey: 'x' }).envelope.type).toBe(
      'ledger.entry',
    )
  })

  it('is consumed once per connection at a time, and again after a close', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq.ordered('ledger').declare()
    await expect(ledger.consume('handler' as never)).rejects.toThrow(
      "ordered queue 'ledger': consume(handler) must be a function",
    )
    const consumer = await ledger.consume(() => undefined)
    await expect(ledger.consume(() => undefined)).rejects.toThrow(
      "ordered queue 'ledger' is already being consumed on this connection",
    )
    await consumer.close()
    expect(consumer.closed).toBe(true)
    await (await ledger.consume(() => undefined)).close()
  })

  it('counts a halted partition in waiting, not in flight, and answers 200 DEGRADED over HTTP', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(2)
      .keyedBy((e) => e.account)
      .onFailure('stop', { attempts: 1 })
      .declare()
    const consumer = await ledger.consume(() => {
      throw new Error('bad entry')
    })
    await ledger.send({ account: 'acct-7', seq: 1 })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt')
    expect([mq.inFlight, consumer.inFlight]).toEqual([0, 0])
    expect([mq.waiting, consumer.waiting]).toEqual([1, 1])
    const answer = await healthAnswer(mq)
    expect(answer.statusCode).toBe(200)
    expect(answer.body).toMatchObject({
      status: 'DEGRADED',
      components: {
        'ordered:ledger': {
          status: 'DEGRADED',
          partitions: '2',
          handled: '0',
          failed: '1',
          skipped: '0',
          halted: String(ledger.partitionOf('acct-7')),
        },
      },
    })
  })

  it('waits for consuming to resume before it runs a failing message again, or a resumed halt', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(1)
      .keyedBy((e) => e.account)
      .onFailure('stop', { attempts: 2, delay: 30 })
      .declare()
    let runs = 0
    await ledger.consume(() => {
      runs++
      if (runs !== 2 && runs !== 3) throw new Error('not yet')
    })
    await ledger.send({ account: 'a', seq: 1 })
    await eventually(() => runs === 1, 5_000, 'the first run')
    mq.pauseConsuming()
    await sleep(150)
    expect(runs).toBe(1)
    mq.resumeConsuming()
    await eventually(() => runs === 2, 5_000, 'the run after the pause')
    await ledger.send({ account: 'a', seq: 2 })
    await ledger.send({ account: 'a', seq: 3 })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'a halt on seq 3')
    expect(runs).toBe(5)
    mq.pauseConsuming()
    ledger.resume(0)
    await sleep(100)
    expect(runs).toBe(5)
    mq.resumeConsuming()
    await eventually(() => runs === 6, 5_000, 'the resumed run')
  })

  it('runs a message whose handler returns Ack.release again in place, as a failure, never behind the others', async () => {
    await using mq = (await connect()).mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(1)
      .keyedBy((e) => e.account)
      .onFailure('retry-in-place', { delay: 5 })
      .declare()
    const seen: number[] = []
    let releases = 2
    await ledger.consume((m) => {
      seen.push(m.payload.seq)
      if (m.payload.seq === 1 && releases-- > 0) return Ack.release()
      return undefined
    })
    for (let seq = 1; seq <= 3; seq++) await ledger.send({ account: 'a', seq })
    await eventually(() => seen.length === 5, 5_000, 'five runs')
    expect(seen).toEqual([1, 1, 1, 2, 3])
    expect([ledger.failed, ledger.handled]).toEqual([2, 3])
  })

  it('parks a message the handler parks in {name}.{p}.parked, counting it skipped', async () => {
    const { mq, transport } = await connect()
    await using _ = mq
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(1)
      .keyedBy((e) => e.account)
      .declare()
    await ledger.consume((m) => (m.payload.seq === 1 ? Ack.park('look at it') : undefined))
    await ledger.send({ account: 'a', seq: 1 })
    await ledger.send({ account: 'a', seq: 2 })
    await eventually(() => ledger.handled === 1, 5_000, 'the second entry')
    expect(transport.messageCount('ledger.0.parked')).toBe(1)
    expect([ledger.skipped, ledger.failed]).toEqual([1, 0])
  })

  it('lists the ordered queues of the connection', async () => {
    await using mq = (await connect()).mq
    expect(mq.orderedQueues).toEqual([])
    const a = await mq.ordered('a').declare()
    const b = await mq.ordered('b').declare()
    expect(mq.orderedQueues).toEqual([a, b])
  })
})
