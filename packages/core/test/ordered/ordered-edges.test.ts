import { afterEach, describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConfigurationError,
  ErrorCodes,
  InMemoryTransport,
  Topology,
  errorCodeOf,
} from '../../src/index.js'
import { describeValue, partitionFor } from '../../src/ordered/partition.js'
import { eventually } from '@acemq/testing'
import { RefusingTransport } from '../refusing-transport.js'

// The edges of ordered queues the scenarios do not reach: what the builder refuses, the
// partition-count check against what the broker holds, the counters and the health report,
// a halt that comes back after a lost channel, and a consume that cannot start every partition.

interface Entry {
  readonly account: string
  readonly seq: number
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const opened: AceMq[] = []
afterEach(async () => {
  for (const mq of opened.splice(0)) await mq.close({ drainTimeout: 0 })
})

interface Reported {
  readonly error: unknown
  readonly context: string
}

async function connect(
  transport: InMemoryTransport = new InMemoryTransport(),
): Promise<{ mq: AceMq; transport: InMemoryTransport; reported: Reported[] }> {
  const reported: Reported[] = []
  const mq = await AceMq.connect(transport, {
    onError: (error, context) => reported.push({ error, context }),
  })
  opened.push(mq)
  return { mq, transport, reported }
}

function ledgerOf(mq: AceMq, partitions = 1) {
  return mq
    .ordered<Entry>('ledger')
    .partitions(partitions)
    .keyedBy((e) => e.account)
}

describe('a value in an error message', () => {
  it('is quoted when a string, typed when a number, boolean or bigint, and named otherwise', () => {
    expect(describeValue('x')).toBe('"x"')
    expect(describeValue(5)).toBe('5 (number)')
    expect(describeValue(true)).toBe('true (boolean)')
    expect(describeValue(5n)).toBe('5 (bigint)')
    expect(describeValue(null)).toBe('null')
    expect(describeValue(undefined)).toBe('undefined')
    expect(describeValue(() => 1)).toBe('a function')
    expect(describeValue([1])).toBe('an array')
    expect(describeValue({ a: 1 })).toBe('an object')
    expect(describeValue(Symbol('s'))).toBe('an object')
  })

  it('names partitionFor’s argument when the count is refused', () => {
    expect(() => partitionFor('k', 0)).toThrow(
      'partitionFor(partitions) must be a whole number from 1 to 1024; got 0 (number)',
    )
  })
})

describe('an ordered queue’s builder', () => {
  it('refuses failure options that are not an object, and takes up to 1000 attempts', async () => {
    const { mq } = await connect()
    const builder = mq.ordered<Entry>('ledger')
    for (const bad of [null, 'fast', 3]) {
      expect(() => builder.onFailure('stop', bad as unknown as object)).toThrow(
        `onFailure(options) must be an object such as { attempts: 3, delay: '1s' }; got ${describeValue(bad)}`,
      )
    }
    expect(builder.onFailure('skip', { attempts: 1_000 }).name).toBe('ledger')
    expect(() => builder.onFailure('skip', { attempts: 1_001 })).toThrow(/from 1 to 1000; got 1001/)
  })

  it('checks every partition’s names before it looks at the connection', async () => {
    const { mq } = await connect()
    await mq.close()
    await expect(mq.ordered('l'.repeat(248)).partitions(10).declare()).rejects.toThrow(
      /too long to carry its '\.parked' queue/,
    )
  })
})

/** An in-memory broker that answers `queueLength` as `answer` says. */
class ProbedTransport extends InMemoryTransport {
  answer: ((queue: string) => Promise<number>) | undefined
  override queueLength(queue: string): Promise<number> {
    return this.answer === undefined ? super.queueLength(queue) : this.answer(queue)
  }
}

describe('the partition count the broker holds', () => {
  it('is not checked by a transport that cannot tell whether a queue exists', async () => {
    const transport = new InMemoryTransport()
    Object.defineProperty(transport, 'queueLength', { value: undefined })
    const { mq } = await connect(transport)
    const ledger = await ledgerOf(mq, 2).declare()
    expect(ledger.queues).toEqual(['ledger.0', 'ledger.1'])
  })

  it('lets a failure other than a missing queue through, declaring nothing', async () => {
    const transport = new ProbedTransport()
    transport.answer = () => Promise.reject(new Error('channel closed'))
    const { mq } = await connect(transport)
    await expect(ledgerOf(mq, 2).declare()).rejects.toThrow('channel closed')
    expect(transport.hasQueue('ledger.0')).toBe(false)
  })

  it('counts the partitions the broker holds up to 1025 at most', async () => {
    const transport = new ProbedTransport()
    transport.answer = () => Promise.resolve(0)
    const { mq } = await connect(transport)
    await expect(ledgerOf(mq, 2).declare()).rejects.toThrow(
      "ordered queue 'ledger' exists on the broker with 1025 partition(s) ('ledger.0' to 'ledger.1024'), so it cannot be declared with 2",
    )
  })

  it('names the partitions found and the count to declare', async () => {
    const { mq } = await connect()
    await mq.applyTopology(Topology.define().queue('ledger.0').queue('ledger.1'))
    await expect(ledgerOf(mq, 4).declare()).rejects.toThrow(
      new ConfigurationError(
        "ordered queue 'ledger' exists on the broker with 2 partition(s) ('ledger.0' to 'ledger.1'), so it cannot be declared with 4: its keys would go to other partitions than the ones their earlier messages wait in. Declare it with partitions(2), or drain and delete its queues first. Nothing was declared.",
      ),
    )
  })

  it('says so when the last partition is there but not the first', async () => {
    const { mq, transport } = await connect()
    await mq.applyTopology(Topology.define().queue('ledger.3'))
    await expect(ledgerOf(mq, 4).declare()).rejects.toThrow(
      "ordered queue 'ledger' has 'ledger.3' but no 'ledger.0', so it cannot be declared with 4: its keys would go to other partitions than the ones their earlier messages wait in. Declare it with partitions(4), or drain and delete its queues first. Nothing was declared.",
    )
    expect(transport.hasQueue('ledger.0')).toBe(false)
  })
})

describe('an ordered queue', () => {
  it('refuses a partitionOf key that is not a string, naming the queue', async () => {
    const { mq } = await connect()
    const ledger = await ledgerOf(mq).declare()
    expect(() => ledger.partitionOf(5 as unknown as string)).toThrow(
      "ordered queue 'ledger': partitionOf(key) must be a string; got 5 (number)",
    )
  })

  it('sends the key in the acemq-ordered-key header', async () => {
    const { mq, transport } = await connect()
    const ledger = await ledgerOf(mq).declare()
    await ledger.send({ account: 'acct-7', seq: 1 })
    expect(transport.peek('ledger.0')[0]?.headers['acemq-ordered-key']).toBe('acct-7')
  })

  it('reports UP with no halted partition, and DEGRADED naming every halted one', async () => {
    const { mq } = await connect()
    const ledger = await ledgerOf(mq, 2).onFailure('stop', { attempts: 1 }).declare()
    expect(ledger.haltedPartitions).toEqual([])
    expect(ledger.report()).toEqual({
      name: 'ordered:ledger',
      status: 'UP',
      details: { partitions: '2', handled: '0', failed: '0', skipped: '0' },
    })
    await ledger.consume(() => {
      throw new Error('bad entry')
    })
    const keys = ['a', 'b', 'c', 'd', 'e']
    const zero = keys.find((key) => ledger.partitionOf(key) === 0) as string
    const one = keys.find((key) => ledger.partitionOf(key) === 1) as string
    await ledger.send({ account: one, seq: 1 })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the first halt')
    expect(ledger.haltedPartitions).toEqual([1])
    await ledger.send({ account: zero, seq: 2 })
    await eventually(() => ledger.haltedPartitions.length === 2, 5_000, 'the second halt')
    expect(ledger.report()).toEqual({
      name: 'ordered:ledger',
      status: 'DEGRADED',
      details: { partitions: '2', handled: '0', failed: '2', skipped: '0', halted: '0,1' },
    })
  })

  it('counts Ack.accept as handled and Ack.deadLetter as skipped', async () => {
    const { mq, transport } = await connect()
    const ledger = await ledgerOf(mq).declare()
    await ledger.consume((m) => (m.payload.seq === 1 ? Ack.accept() : Ack.deadLetter('no')))
    await ledger.send({ account: 'a', seq: 1 })
    await ledger.send({ account: 'a', seq: 2 })
    await eventually(() => ledger.skipped === 1, 5_000, 'the dead letter')
    expect([ledger.handled, ledger.failed, ledger.skipped]).toEqual([1, 0, 1])
    expect(transport.messageCount('ledger.0.dlq')).toBe(1)
  })

  it('reports a halt once, as PARTITION_HALTED, naming the partition, queue and message', async () => {
    const { mq, reported } = await connect()
    const ledger = await ledgerOf(mq).onFailure('stop', { attempts: 2, delay: 1 }).declare()
    await ledger.consume(() => {
      throw new Error('bad entry')
    })
    await ledger.send({ account: 'a', seq: 1 }, { id: 'entry-1' })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt')
    expect(reported).toHaveLength(1)
    const [{ error, context }] = reported as [Reported]
    expect(errorCodeOf(error)).toBe(ErrorCodes.PARTITION_HALTED)
    expect((error as Error).message).toBe('halted after 2 attempt(s): bad entry')
    expect(context).toBe(
      "partition 0 of ordered queue 'ledger' ('ledger.0') halted on message entry-1; resume(0) runs it again",
    )
  })

  it('halts again at once, reporting nothing more, when its halted message comes back after a lost channel', async () => {
    const { mq, transport, reported } = await connect()
    const ledger = await ledgerOf(mq).onFailure('stop', { attempts: 2, delay: 1 }).declare()
    let runs = 0
    await ledger.consume(() => {
      runs++
      throw new Error('bad entry')
    })
    await ledger.send({ account: 'a', seq: 1 })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt')
    transport.closeChannel('ledger.0', 'consumer channel lost')
    await eventually(() => transport.unackedCount('ledger.0') === 1, 2_000, 'held again')
    await eventually(() => ledger.haltedPartitions.length === 1, 2_000, 'halted again')
    await sleep(30)
    expect(ledger.haltedPartitions).toEqual([0])
    const halts = reported.filter((r) => errorCodeOf(r.error) === ErrorCodes.PARTITION_HALTED)
    expect([runs, ledger.failed, halts.length]).toEqual([2, 2, 1])
  })

  it('runs a new message that arrives after another process finished the one it halted on', async () => {
    const { mq, transport } = await connect()
    const ledger = await ledgerOf(mq).onFailure('stop', { attempts: 1 }).declare()
    const handled: number[] = []
    await ledger.consume((m) => {
      if (m.payload.seq === 1) throw new Error('bad entry')
      handled.push(m.payload.seq)
    })
    await ledger.send({ account: 'a', seq: 1 })
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt')
    transport.closeChannel('ledger.0', 'consumer channel lost')
    // Another process takes the halted entry and deals with it.
    const taken = await transport.getOne('ledger.0')
    taken?.ack()
    await ledger.send({ account: 'a', seq: 2 })
    await eventually(() => handled.length === 1, 5_000, 'the new entry handled')
    expect(handled).toEqual([2])
    expect(ledger.haltedPartitions).toEqual([])
  })

  it('closes a partition waiting out its retry delay without a fault', async () => {
    const { mq, reported } = await connect()
    const ledger = await ledgerOf(mq).onFailure('retry-in-place', { delay: '10s' }).declare()
    const consumer = await ledger.consume(() => {
      throw new Error('not yet')
    })
    await ledger.send({ account: 'a', seq: 1 })
    await eventually(() => consumer.waiting === 1, 5_000, 'the wait')
    await consumer.close({ drainTimeout: 0 })
    expect(reported).toEqual([])
    expect(ledger.haltedPartitions).toEqual([])
  })
})

describe('an ordered consumer', () => {
  it('adds up what its partitions run and hold', async () => {
    const { mq } = await connect()
    const ledger = await ledgerOf(mq, 2).declare()
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    const consumer = await ledger.consume(() => released)
    const keys = ['a', 'b', 'c', 'd', 'e']
    for (const p of [0, 1]) {
      await ledger.send({
        account: keys.find((k) => ledger.partitionOf(k) === p) as string,
        seq: p,
      })
    }
    await eventually(() => consumer.inFlight === 2, 5_000, 'both partitions running')
    mq.pauseConsuming()
    for (const p of [0, 1]) {
      await ledger.send({
        account: keys.find((k) => ledger.partitionOf(k) === p) as string,
        seq: p,
      })
    }
    release()
    await eventually(() => consumer.held === 2, 5_000, 'both held at the pause gate')
    mq.resumeConsuming()
    await eventually(() => ledger.handled === 4, 5_000, 'all handled')
  })

  it('closes when disposed', async () => {
    const { mq } = await connect()
    const ledger = await ledgerOf(mq).declare()
    let closed: boolean | undefined
    {
      await using consumer = await ledger.consume(() => undefined)
      closed = consumer.closed
    }
    expect(closed).toBe(false)
    // Closed, so the queue can be consumed again on this connection.
    await expect(ledger.consume(() => undefined)).resolves.toBeDefined()
  })
})

it('closes the partitions it started when one cannot start, and rejects with that failure', async () => {
  const transport = new RefusingTransport()
  transport.refused = 'ledger.1'
  const { mq } = await connect(transport)
  const ledger = await ledgerOf(mq, 3).declare()
  const handled: number[] = []
  await expect(ledger.consume((m) => void handled.push(m.payload.seq))).rejects.toThrow(
    'cannot consume ledger.1',
  )
  transport.refused = ''
  // The partitions that started were closed: a message sent now waits for the next consumer.
  await ledger.send({ account: 'a', seq: 1 })
  await sleep(30)
  expect(handled).toEqual([])
  await ledger.consume((m) => void handled.push(m.payload.seq))
  await eventually(() => handled.length === 1, 5_000, 'handled by the next consumer')
})

it('does not wait for a handler already running on a partition it started when another cannot start', async () => {
  const transport = new RefusingTransport()
  transport.refused = 'ledger.1'
  const { mq } = await connect(transport)
  const ledger = await ledgerOf(mq, 2).declare()
  const zero = ['a', 'b', 'c', 'd', 'e'].find((key) => ledger.partitionOf(key) === 0) as string
  await ledger.send({ account: zero, seq: 1 })
  let started = false
  // Returns once its signal aborts: at once with the drain of 0 the close should give it.
  const refused = ledger.consume((_, { signal }) => {
    started = true
    return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()))
  })
  const at = Date.now()
  await expect(refused).rejects.toThrow('cannot consume ledger.1')
  expect(started).toBe(true)
  expect(Date.now() - at).toBeLessThan(2_000)
})
