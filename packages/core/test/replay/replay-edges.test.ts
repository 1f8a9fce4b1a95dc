import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  AceMqError,
  ConfigurationError,
  ErrorCodes,
  InMemoryTransport,
  PublishFailedError,
  ReplayStoppedError,
  Topology,
  errorCodeOf,
  type Headers,
  type ReplayMessage,
  type ReplayProgress,
} from '../../src/index.js'
import { replayCopy, rfc3339Seconds } from '../../src/replay/replay.js'
import {
  headerInteger,
  type GiveBack,
  type OutgoingMessage,
  type Transport,
} from '../../src/spi.js'

// Replay's edges on the in-memory transport: the refusals by argument, progress and aborts,
// what the copy keeps and drops, the errors that name what was not written, and what a
// message looks like to a filter. The shared scenarios (replay.test.ts) cover the family's path.

/** The in-memory broker, with a publish that fails for the routing keys in `failing`. */
class FailingTransport extends InMemoryTransport {
  readonly failing = new Map<string, unknown>()
  readonly published: OutgoingMessage[] = []

  #gets = 0
  #getFailures: { readonly from: number; readonly errors: readonly unknown[] } | undefined

  /** Makes basic.get fail from its `from`-th call on: with each of `errors` in turn, then the last. */
  failGetsFrom(from: number, ...errors: unknown[]): void {
    this.#getFailures = { from, errors }
  }

  override async getOne(queue: string): ReturnType<InMemoryTransport['getOne']> {
    const call = ++this.#gets
    const failures = this.#getFailures
    if (failures !== undefined && call >= failures.from) {
      throw failures.errors[Math.min(call - failures.from, failures.errors.length - 1)]
    }
    return super.getOne(queue)
  }

  override publish(...args: Parameters<InMemoryTransport['publish']>): Promise<void> {
    const [message] = args
    this.published.push(message)
    const id = String(message.headers['x-acemq-id'])
    if (this.failing.has(id)) return Promise.reject(this.failing.get(id))
    return super.publish(...args)
  }
}

let transport: FailingTransport
let mq: AceMq

beforeEach(async () => {
  transport = new FailingTransport()
  mq = await AceMq.connect(transport)
  await mq.applyTopology(Topology.define().queueWithDeadLetter('orders'))
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
})

async function deadLetter(id: string, headers: Headers = {}, queue = 'orders.dlq'): Promise<void> {
  await transport.publish({
    exchange: '',
    routingKey: queue,
    body: Buffer.from(JSON.stringify({ id })),
    headers: { 'x-acemq-id': id, ...headers },
    properties: { contentType: 'application/json', messageId: id },
    persistent: true,
    mandatory: true,
  })
  transport.published.length = 0
}

const ids = (queue: string): string[] =>
  transport.peek(queue).map((m) => String(m.headers['x-acemq-id']))

describe('replay(max, filter) refuses', () => {
  it.each([
    ['a negative max', -1],
    ['a NaN max', Number.NaN],
    ['a fractional max', 1.5],
    ['a max that is no number', '3'],
    ['-Infinity', Number.NEGATIVE_INFINITY],
  ])('%s, naming it', async (_, max) => {
    await expect(mq.replay('orders.dlq').replay(max as number)).rejects.toThrow(
      `replay(max) must be a whole number of at least 0 (or Infinity); got ${String(max)}`,
    )
  })

  it('a filter that is no function, and a source with no target', async () => {
    await expect(
      mq.replay('orders.dlq').replay(1, 'all' as unknown as () => boolean),
    ).rejects.toThrow('replay(filter) must be a function; got all')
    const error = await mq
      .replay('orders')
      .replayAll()
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigurationError)
    expect((error as Error).message).toBe(
      "replay('orders'): the queue does not end in .dlq or .parked, so say where its messages go with .into(queue)",
    )
  })

  it('a replay into itself, by name; and takes a queue named only a suffix for no dead-letter queue', () => {
    expect(() => mq.replay('orders.dlq').into('orders.dlq')).toThrow(
      "replay('orders.dlq').into('orders.dlq'): a queue cannot be replayed into itself",
    )
    expect(() => mq.replay('orders.dlq').into('')).toThrow(/replay\(\)\.into\(queue\)/)
    expect(() => mq.replay('')).toThrow(/replay\(queue\)/)
    expect(mq.replay('.dlq').target).toBeUndefined()
    expect(mq.replay('.parked').target).toBeUndefined()
    expect(mq.replay('x.dlq').target).toBe('x')
    expect(mq.replay('orders.parked').target).toBe('orders')
    expect(mq.replay('orders.dlq.parked').target).toBe('orders.dlq')
    expect(mq.replay('orders.dlqx').target).toBeUndefined()
  })

  it('a peek of a count that is no whole number', async () => {
    for (const count of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(mq.replay('orders.dlq').peek(count)).rejects.toThrow(
        `peek(count) must be a whole number of at least 0; got ${String(count)}`,
      )
    }
    expect(await mq.replay('orders.dlq').peek(0)).toEqual([])
  })

  it('a transport that cannot take messages one by one or count a queue', async () => {
    const bare = new InMemoryTransport() as Transport
    Object.defineProperty(bare, 'getOne', { value: undefined })
    const other = await AceMq.connect(bare)
    try {
      const pending = await other
        .replay('orders.dlq')
        .pending()
        .catch((e: unknown) => e)
      expect((pending as Error).message).toBe(
        'the in-memory transport cannot count a queue, so it cannot replay',
      )
      expect(errorCodeOf(pending)).toBe(ErrorCodes.UNSUPPORTED)
      await expect(other.replay('orders.dlq').replayAll()).rejects.toThrow(
        'the in-memory transport cannot take messages one by one, so it cannot replay',
      )
      await expect(other.replay('orders.dlq').peek(1)).rejects.toThrow(/take messages one by one/)
    } finally {
      await other.close()
    }
    const uncounting = new InMemoryTransport() as Transport
    Object.defineProperty(uncounting, 'queueLength', { value: undefined })
    const third = await AceMq.connect(uncounting)
    try {
      await expect(third.replay('orders.dlq').replayAll()).rejects.toThrow(/one by one/)
    } finally {
      await third.close()
    }
  })

  it('a closed connection, and a signal already aborted', async () => {
    await deadLetter('a')
    const aborted = AbortSignal.abort()
    const error = await mq
      .replay('orders.dlq')
      .replayAll({ signal: aborted })
      .catch((e: unknown) => e)
    expect((error as Error).name).toBe('AbortError')
    expect(ids('orders.dlq')).toEqual(['a'])
    const other = await AceMq.connect(new InMemoryTransport())
    await other.close()
    await expect(other.replay('orders.dlq').replayAll()).rejects.toThrow(/closed/)
    await expect(other.replay('orders.dlq').peek(1)).rejects.toThrow(/closed/)
  })
})

describe('a replay run', () => {
  it('rejects at once when its signal has aborted, even on an empty queue', async () => {
    const error = await mq
      .replay('orders.dlq')
      .replayAll({ signal: AbortSignal.abort() })
      .catch((e: unknown) => e)
    expect((error as Error).name).toBe('AbortError')
  })

  it('reports progress once per message when the filter leaves every one', async () => {
    for (let i = 1; i <= 2; i++) await deadLetter(`m-${i}`)
    const progress: ReplayProgress[] = []
    expect(
      await mq.replay('orders.dlq').replay(Infinity, () => false, {
        onProgress: (p) => progress.push(p),
      }),
    ).toBe(0)
    expect(progress).toEqual([
      { moved: 0, scanned: 1, total: 2 },
      { moved: 0, scanned: 2, total: 2 },
    ])
  })

  it('rejects with the give-back’s failure when the run itself went well', async () => {
    await deadLetter('m-1')
    await deadLetter('m-2')
    transport.failGetsFrom(3, new Error('channel closed'))
    await expect(mq.replay('orders.dlq').replay(1, (m) => m.envelope.id !== 'm-1')).rejects.toThrow(
      'channel closed',
    )
    expect(ids('orders')).toEqual(['m-2'])
  })

  it('reports its progress after each message the filter leaves and after each window', async () => {
    for (let i = 1; i <= 4; i++) await deadLetter(`m-${i}`)
    const progress: ReplayProgress[] = []
    const returned: GiveBack[] = []
    const moved = await mq.replay('orders.dlq').replay(Infinity, (m) => m.envelope.id !== 'm-2', {
      onProgress: (p) => progress.push(p),
      onReturned: (r) => returned.push(r),
    })
    expect(moved).toBe(3)
    expect(progress).toEqual([
      { moved: 0, scanned: 2, total: 4 },
      { moved: 3, scanned: 4, total: 4 },
    ])
    // m-2 goes back twice: once to learn where the queue puts it back.
    expect(returned).toEqual([{ returned: 2, cycled: false }])
    expect(ids('orders.dlq')).toEqual(['m-2'])
    expect(ids('orders')).toEqual(['m-1', 'm-3', 'm-4'])
  })

  it('takes windows of 100: 250 messages in three, progress after each', async () => {
    for (let i = 0; i < 250; i++) await deadLetter(`w-${i}`)
    const progress: ReplayProgress[] = []
    expect(await mq.replay('orders.dlq').replayAll({ onProgress: (p) => progress.push(p) })).toBe(
      250,
    )
    expect(progress.map((p) => p.moved)).toEqual([100, 200, 250])
    expect(progress.every((p) => p.total === 250)).toBe(true)
    expect(ids('orders')).toHaveLength(250)
  })

  it('stops at max, within a window, and leaves the rest in order', async () => {
    for (let i = 1; i <= 5; i++) await deadLetter(`m-${i}`)
    expect(await mq.replay('orders.dlq').replay(2)).toBe(2)
    expect(ids('orders')).toEqual(['m-1', 'm-2'])
    expect(ids('orders.dlq')).toEqual(['m-3', 'm-4', 'm-5'])
    expect(await mq.replay('orders.dlq').replay(0)).toBe(0)
    expect(ids('orders.dlq')).toEqual(['m-3', 'm-4', 'm-5'])
  })

  it('looks only at the messages waiting when it starts', async () => {
    for (let i = 1; i <= 3; i++) await deadLetter(`m-${i}`)
    let added = false
    const moved = await mq.replay('orders.dlq').replay(Infinity, (message) => {
      if (!added) {
        added = true
        void deadLetter('late')
      }
      return message.envelope.id !== 'late'
    })
    expect(moved).toBe(3)
    expect(ids('orders.dlq')).toEqual(['late'])
  })

  it('ends at an empty queue before its total when another consumer took messages', async () => {
    for (let i = 1; i <= 3; i++) await deadLetter(`m-${i}`)
    const getOne = transport.getOne.bind(transport)
    let taken = false
    transport.getOne = async (queue) => {
      if (!taken) {
        taken = true
        // Another consumer takes two of the three the run counted.
        ;(await getOne(queue))?.ack()
        ;(await getOne(queue))?.ack()
      }
      return getOne(queue)
    }
    const progress: ReplayProgress[] = []
    expect(await mq.replay('orders.dlq').replayAll({ onProgress: (p) => progress.push(p) })).toBe(1)
    expect(progress).toEqual([{ moved: 1, scanned: 1, total: 3 }])
    expect(ids('orders')).toEqual(['m-3'])
  })

  it('stops between windows when its signal aborts, with what it moved on the target', async () => {
    for (let i = 0; i < 150; i++) await deadLetter(`a-${i}`)
    const controller = new AbortController()
    const error = await mq
      .replay('orders.dlq')
      .replayAll({
        signal: controller.signal,
        onProgress: (p) => {
          if (p.moved === 100) controller.abort()
        },
      })
      .catch((e: unknown) => e)
    expect((error as Error).name).toBe('AbortError')
    expect(error).not.toBeInstanceOf(ReplayStoppedError)
    expect(ids('orders')).toHaveLength(100)
    expect(ids('orders.dlq')).toHaveLength(50)
  })

  it('calls an AbortError the filter throws, with no signal aborted, a stop', async () => {
    await deadLetter('m-1')
    const abort = new DOMException('gone', 'AbortError')
    const error = await mq
      .replay('orders.dlq')
      .replay(Infinity, () => {
        throw abort
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ReplayStoppedError)
    expect((error as ReplayStoppedError).cause).toBe(abort)
    const controller = new AbortController()
    const signalled = await mq
      .replay('orders.dlq')
      .replay(
        Infinity,
        () => {
          controller.abort()
          throw new Error('not an abort')
        },
        { signal: controller.signal },
      )
      .catch((e: unknown) => e)
    expect(signalled).toBeInstanceOf(ReplayStoppedError)
    expect(ids('orders.dlq')).toEqual(['m-1'])
  })
})

describe('a replay that cannot write every copy', () => {
  it('names the first three it could not write, counts the rest, and takes the first one’s code', async () => {
    for (let i = 1; i <= 6; i++) await deadLetter(`m-${i}`)
    const refused = new PublishFailedError('NOT_FOUND - no queue', {
      code: ErrorCodes.EXCHANGE_NOT_FOUND,
    })
    for (const id of ['m-2', 'm-3', 'm-4', 'm-5', 'm-6']) transport.failing.set(id, refused)
    const returned: GiveBack[] = []
    const error = (await mq
      .replay('orders.dlq')
      .replayAll({ onReturned: (r) => returned.push(r) })
      .catch((e: unknown) => e)) as ReplayStoppedError
    expect(error).toBeInstanceOf(ReplayStoppedError)
    expect(error).toMatchObject({
      source: 'orders.dlq',
      target: 'orders',
      moved: 1,
      notWritten: ['m-2', 'm-3', 'm-4', 'm-5', 'm-6'],
    })
    expect(error.cause).toBeInstanceOf(AggregateError)
    expect(errorCodeOf(error)).toBe(ErrorCodes.EXCHANGE_NOT_FOUND)
    expect(error.message).toBe(
      "replay of 'orders.dlq' into 'orders' stopped after moving 1 message(s): message 'm-2' could not be written (NOT_FOUND - no queue); message 'm-3' could not be written (NOT_FOUND - no queue); message 'm-4' could not be written (NOT_FOUND - no queue); and 2 more; every message not moved is still on 'orders.dlq'",
    )
    expect(returned).toEqual([{ returned: 6, cycled: false }])
    expect(ids('orders.dlq')).toEqual(['m-2', 'm-3', 'm-4', 'm-5', 'm-6'])
  })

  it('names three with no “more”, shortens a long id, and falls back to a publish failure for a cause with no code', async () => {
    const long = `foreign-${'x'.repeat(100)}`
    await deadLetter(long)
    await deadLetter('m-2')
    await deadLetter('m-3')
    transport.failing.set(long, new Error('plain'))
    transport.failing.set('m-2', 'a string')
    transport.failing.set('m-3', new Error('third'))
    const error = (await mq
      .replay('orders.dlq')
      .replayAll()
      .catch((e: unknown) => e)) as ReplayStoppedError
    expect(errorCodeOf(error)).toBe(ErrorCodes.PUBLISH_FAILED)
    expect(error.message).toBe(
      `replay of 'orders.dlq' into 'orders' stopped after moving 0 message(s): message '${long.slice(0, 77)}…' could not be written (plain); message 'm-2' could not be written (a string); message 'm-3' could not be written (third); every message not moved is still on 'orders.dlq'`,
    )
    expect(error.notWritten).toEqual([long, 'm-2', 'm-3'])
  })

  it('keeps an id of 80 characters whole, and takes the code of a single failure', async () => {
    const id = 'y'.repeat(80)
    await deadLetter(id)
    transport.failing.set(id, new AceMqError('blocked', { code: ErrorCodes.CONNECTION_BLOCKED }))
    const error = (await mq
      .replay('orders.dlq')
      .replayAll()
      .catch((e: unknown) => e)) as ReplayStoppedError
    expect(error.cause).toBeInstanceOf(AceMqError)
    expect(errorCodeOf(error)).toBe(ErrorCodes.CONNECTION_BLOCKED)
    expect(error.message).toContain(`message '${id}' could not be written (blocked)`)
  })

  it('says why a run stopped that wrote nothing wrong (a connection gone), with its code', () => {
    const cause = new AceMqError('down', { code: ErrorCodes.CONNECTION_DOWN })
    const error = new ReplayStoppedError('a.dlq', 'a', 3, [], cause)
    expect(error.message).toBe(
      "replay of 'a.dlq' into 'a' stopped after moving 3 message(s): down; every message not moved is still on 'a.dlq'",
    )
    expect(errorCodeOf(error)).toBe(ErrorCodes.CONNECTION_DOWN)
    const aggregate = new AggregateError([new Error('x'), cause])
    expect(errorCodeOf(new ReplayStoppedError('a.dlq', 'a', 0, [], aggregate))).toBe(
      ErrorCodes.PUBLISH_FAILED,
    )
  })

  it('rejects with the run’s error, not the give-back’s, when both fail', async () => {
    await deadLetter('m-1')
    await deadLetter('m-2')
    transport.failing.set('m-1', new Error('refused'))
    transport.failGetsFrom(2, new Error('channel closed'))
    const error = await mq
      .replay('orders.dlq')
      .replay(1)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ReplayStoppedError)
    expect((error as Error).message).toMatch(/message 'm-1' could not be written \(refused\)/)
  })
})

describe('a peek', () => {
  it('rejects with the failure that stopped it, not the give-back’s after it', async () => {
    await deadLetter('m-1')
    await deadLetter('m-2')
    transport.failGetsFrom(2, new Error('first'), new Error('second'))
    await expect(mq.replay('orders.dlq').peek(2)).rejects.toThrow('first')
  })

  it('rejects when it cannot give back what it looked at', async () => {
    await deadLetter('m-1')
    await deadLetter('m-2')
    transport.failGetsFrom(2, new Error('channel closed'))
    await expect(mq.replay('orders.dlq').peek(1)).rejects.toThrow('channel closed')
  })

  it('answers once the broker counts the messages given back, so a count right after sees them', async () => {
    for (let i = 1; i <= 4; i++) await deadLetter(`m-${i}`)
    const getOne = transport.getOne.bind(transport)
    const queueLength = transport.queueLength.bind(transport)
    let gets = 0
    let lagging = 0
    // After the give-back, the broker's count lags three answers behind.
    transport.getOne = async (queue) => {
      if (++gets === 3) lagging = 3
      return getOne(queue)
    }
    transport.queueLength = async (queue) => {
      const length = await queueLength(queue)
      if (lagging === 0) return length
      lagging--
      return length - 1
    }
    expect(await mq.replay('orders.dlq').peek(2)).toHaveLength(2)
    expect(lagging).toBe(0)
    expect(await mq.replay('orders.dlq').pending()).toBe(4)
  })
})

describe('a message as a filter or a peek sees it', () => {
  it('decodes its payload on use, counts its replays in either letter case, and its returns', async () => {
    await deadLetter('m-1', {
      'ACEMQ-REPLAY-COUNT': { '!': 'int', value: 4 },
      'x-delivery-count': { '!': 'long', value: 2 },
      'x-tenant': 'acme',
    })
    await deadLetter('m-2', { 'X-AceMq-Replay-Count': { '!': 'int', value: 2 } })
    await deadLetter('m-3', {
      'acemq-replay-count': { '!': 'int', value: -2 },
      'x-delivery-count': { '!': 'long', value: -3 },
    })
    await deadLetter('m-4', { 'acemq-replay-count': 7, 'x-acemq-replay-count': 9 })
    const seen = await mq.replay('orders.dlq').peek(10)
    expect(seen.map((m) => [m.envelope.id, m.replayCount, m.returns])).toEqual([
      ['m-1', 4, 2],
      ['m-2', 2, 0],
      ['m-3', 0, 0],
      ['m-4', 7, 0],
    ])
    const [first] = seen as [ReplayMessage]
    expect(first.payload).toEqual({ id: 'm-1' })
    expect(first.contentType).toBe('application/json')
    expect(first.headers['x-tenant']).toBe('acme')
    expect(first.wireHeaders['x-acemq-id']).toBe('m-1')
    expect(Buffer.from(first.body).toString()).toBe('{"id":"m-1"}')
  })

  it('throws from payload for a content type no codec takes', async () => {
    await transport.publish({
      exchange: '',
      routingKey: 'orders.dlq',
      body: Buffer.from('<a/>'),
      headers: { 'x-acemq-id': 'xml' },
      properties: { contentType: 'application/xml' },
      persistent: true,
      mandatory: true,
    })
    const [message] = await mq.replay('orders.dlq').peek(1)
    expect(() => message?.payload).toThrow('no codec is registered for "application/xml"')
  })

  it('takes the message-id for the envelope id when the message has no x-acemq-id', async () => {
    await transport.publish({
      exchange: '',
      routingKey: 'orders.dlq',
      body: Buffer.from('{}'),
      headers: {},
      properties: { contentType: 'application/json', messageId: 'foreign-1' },
      persistent: true,
      mandatory: true,
    })
    const [message] = await mq.replay('orders.dlq').peek(1)
    expect(message?.envelope.id).toBe('foreign-1')
    expect(message?.envelope.type).toBe('orders.dlq')
  })
})

describe('a replayed copy', () => {
  it('is confirmed, mandatory and persistent to the target, its replay headers written anew in any letter case', () => {
    const copy = replayCopy(
      {
        body: Buffer.from('{}'),
        headers: {
          'x-acemq-id': 'm-1',
          'x-acemq-attempt': { '!': 'int', value: 4 },
          'ACEMQ-REPLAYED-FROM': 'old',
          'Acemq-Replayed-At': 'then',
          'X-ACEMQ-REPLAY-COUNT': { '!': 'int', value: 2 },
          'Acemq-Replay-Count': { '!': 'int', value: 2 },
          'X-AceMq-Error': 'gave up',
          'x-tenant': 'acme',
        },
        properties: { contentType: 'application/json', messageId: 'm-1' },
        routingKey: 'orders.dlq',
      },
      'orders.dlq',
      'orders',
      false,
    )
    expect(copy).toMatchObject({
      exchange: '',
      routingKey: 'orders',
      persistent: true,
      mandatory: true,
    })
    const keys = Object.keys(copy.headers)
    expect(keys).not.toContain('ACEMQ-REPLAYED-FROM')
    expect(keys).not.toContain('Acemq-Replayed-At')
    expect(keys).not.toContain('X-ACEMQ-REPLAY-COUNT')
    expect(keys).not.toContain('Acemq-Replay-Count')
    expect(keys).not.toContain('X-AceMq-Error')
    expect(keys).not.toContain('x-acemq-error')
    expect(copy.headers['acemq-replayed-from']).toBe('orders.dlq')
    expect(copy.headers['acemq-replay-count']).toEqual({ '!': 'int', value: 3 })
    expect(headerInteger(copy.headers['x-acemq-attempt'])).toBe(1)
    expect(copy.headers['x-tenant']).toBe('acme')
  })

  it('writes the replay time to the second, UTC', () => {
    expect(rfc3339Seconds(new Date(Date.UTC(2026, 11, 3, 8, 15, 42, 999)))).toBe(
      '2026-12-03T08:15:42Z',
    )
  })
})
