import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  AceMq,
  AceMqError,
  ErrorCodes,
  InMemoryTransport,
  Topology,
  type Headers,
} from '../../src/index.js'
import { LOCKED_QUEUE_WAIT_MS, QueueReader } from '../../src/replay/queue-reader.js'
import type { Delivery, TransportConsumeOptions, TransportSubscription } from '../../src/spi.js'

// The queue reader on the in-memory transport: reading a queue by subscribing when basic.get is
// refused (a quorum queue with a single active consumer), what a give-back does when the broker
// fails under it, and how it recognises the message it gave back.

/** The in-memory broker, refusing basic.get on the queues in `locked` as RabbitMQ does. */
class LockingTransport extends InMemoryTransport {
  readonly locked = new Map<string, unknown>()
  /** Queues whose subscription is pushed nothing: another consumer is the active one. */
  readonly elsewhere = new Set<string>()
  readonly subscriptions: { queue: string; prefetch: number; closed: boolean }[] = []
  gets = 0

  override async getOne(queue: string): Promise<Delivery | undefined> {
    this.gets++
    if (this.locked.has(queue)) throw this.locked.get(queue)
    return super.getOne(queue)
  }

  override async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    const seen = { queue, prefetch: options.prefetch, closed: false }
    this.subscriptions.push(seen)
    if (this.elsewhere.has(queue)) {
      return {
        cancel: async () => undefined,
        close: async () => {
          seen.closed = true
        },
      }
    }
    const subscription = await super.consume(queue, options, onDelivery)
    return {
      cancel: () => subscription.cancel(),
      close: async () => {
        seen.closed = true
        await subscription.close()
      },
    }
  }
}

const resourceLocked = (): Error =>
  new AceMqError('basic.get refused', {
    cause: new Error("RESOURCE_LOCKED - cannot obtain access to queue 'q'"),
  })

let transport: LockingTransport
let mq: AceMq

beforeEach(async () => {
  transport = new LockingTransport()
  mq = await AceMq.connect(transport)
  await mq.applyTopology(
    Topology.define()
      .queue('classic')
      .queue('round', { arguments: { 'x-delivery-limit': -1 } }),
  )
})

afterEach(async () => {
  vi.useRealTimers()
  await mq.close({ drainTimeout: 0 })
})

async function fill(queue: string, count: number, headers: (i: number) => Headers = () => ({})) {
  for (let i = 1; i <= count; i++) {
    await transport.publish({
      exchange: '',
      routingKey: queue,
      body: Buffer.from(String(i)),
      headers: { 'x-acemq-id': `m-${i}`, ...headers(i) },
      properties: {},
      persistent: true,
      mandatory: true,
    })
  }
}

const ids = (queue: string): string[] =>
  transport.peek(queue).map((m) => String(m.headers['x-acemq-id']))

describe('a queue that refuses basic.get (a single active consumer)', () => {
  it.each([
    ['an AMQP 405', Object.assign(new Error('access refused'), { code: 405 })],
    ['RESOURCE_LOCKED in its cause', resourceLocked()],
    ['RESOURCE-LOCKED', new Error('RESOURCE-LOCKED')],
  ])('is read through a subscription of its own when refused with %s', async (_, refusal) => {
    await fill('classic', 4)
    transport.locked.set('classic', refusal)
    const reader = new QueueReader(transport, 'classic')
    const taken: Delivery[] = []
    for (;;) {
      const delivery = await reader.next()
      if (delivery === undefined) break
      taken.push(delivery)
    }
    expect(taken.map((d) => String(d.headers['x-acemq-id']))).toEqual(['m-1', 'm-2', 'm-3', 'm-4'])
    expect(transport.subscriptions).toEqual([{ queue: 'classic', prefetch: 65_535, closed: false }])
    expect(await reader.next()).toBeUndefined()
    reader.remove(taken[1] as Delivery)
    expect(await reader.giveBack()).toEqual({ returned: 3, cycled: false })
    expect(transport.subscriptions[0]?.closed).toBe(true)
    expect(ids('classic')).toEqual(['m-1', 'm-3', 'm-4'])
  })

  it('gives back every message pushed, read or not, when the reader stops early', async () => {
    await fill('classic', 5)
    transport.locked.set('classic', resourceLocked())
    const reader = new QueueReader(transport, 'classic')
    const first = await reader.next()
    expect(first?.headers['x-acemq-id']).toBe('m-1')
    reader.remove(first as Delivery)
    expect(await reader.giveBack()).toEqual({ returned: 4, cycled: false })
    expect(ids('classic')).toEqual(['m-2', 'm-3', 'm-4', 'm-5'])
  })

  it('reads an empty locked queue as empty at once', async () => {
    transport.locked.set('classic', resourceLocked())
    const reader = new QueueReader(transport, 'classic')
    expect(await reader.next()).toBeUndefined()
    expect(await reader.giveBack()).toEqual({ returned: 0, cycled: false })
  })

  it('says which consumer holds the queue when its subscription is pushed nothing for a second', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    await fill('classic', 2)
    const refusal = resourceLocked()
    transport.locked.set('classic', refusal)
    transport.elsewhere.add('classic')
    const reader = new QueueReader(transport, 'classic')
    const reading = reader.next().catch((e: unknown) => e)
    await vi.advanceTimersByTimeAsync(LOCKED_QUEUE_WAIT_MS - 1)
    let done = false
    void reading.then(() => (done = true))
    await vi.advanceTimersByTimeAsync(0)
    expect(done).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    const error = (await reading) as AceMqError
    expect(error.message).toBe(
      "cannot look into queue 'classic': it has a single active consumer on another connection, which alone gets its 2 waiting message(s) (a quorum queue with a single active consumer refuses basic.get). A halted ordered partition's process holds its head: stop that process, and the message goes back in its place; its health report says which partition halted.",
    )
    expect(error.code).toBe(ErrorCodes.INVALID_STATE)
    expect(error.cause).toBe(refusal)
    expect(transport.subscriptions[0]?.closed).toBe(true)
  })

  it('does not subscribe for any other failure, or for a refusal once it holds messages', async () => {
    await fill('classic', 2)
    const other = new Error('NOT_FOUND')
    transport.locked.set('classic', other)
    await expect(new QueueReader(transport, 'classic').next()).rejects.toBe(other)
    // A refusal nested deeper than five causes is not recognised.
    let deep: Error = new Error('RESOURCE_LOCKED')
    for (let i = 0; i < 5; i++) deep = new Error(`wrapped ${i}`, { cause: deep })
    transport.locked.set('classic', deep)
    await expect(new QueueReader(transport, 'classic').next()).rejects.toBe(deep)
    transport.locked.set('classic', { code: 405 })
    await expect(new QueueReader(transport, 'classic').next()).rejects.toEqual({ code: 405 })
    transport.locked.delete('classic')
    const reader = new QueueReader(transport, 'classic')
    await reader.next()
    const locked = resourceLocked()
    transport.locked.set('classic', locked)
    await expect(reader.next()).rejects.toBe(locked)
    expect(transport.subscriptions).toEqual([])
  })
})

describe('reading', () => {
  it('stays at the end once it found the queue empty, whatever arrives after', async () => {
    await fill('classic', 1)
    const reader = new QueueReader(transport, 'classic')
    expect(await reader.next()).toBeDefined()
    expect(await reader.next()).toBeUndefined()
    await fill('classic', 1)
    expect(await reader.next()).toBeUndefined()
  })

  it('gives back none of what it removed', async () => {
    await fill('classic', 4)
    const reader = new QueueReader(transport, 'classic')
    const first = await reader.next()
    await reader.next()
    await reader.next()
    reader.remove(first as Delivery)
    // m-2 goes back twice (once to learn where the queue puts it), then m-3.
    expect(await reader.giveBack()).toEqual({ returned: 3, cycled: false })
    expect(ids('classic')).toEqual(['m-2', 'm-3', 'm-4'])
  })
})

describe('giving back', () => {
  it('gives everything back first to last without a look at the head once the queue was read to its end', async () => {
    await fill('round', 3)
    const reader = new QueueReader(transport, 'round')
    while ((await reader.next()) !== undefined);
    const gets = transport.gets
    expect(await reader.giveBack()).toEqual({ returned: 3, cycled: false })
    expect(transport.gets).toBe(gets)
    expect(ids('round')).toEqual(['m-1', 'm-2', 'm-3'])
    // Nothing held: nothing to give back.
    expect(await reader.giveBack()).toEqual({ returned: 0, cycled: false })
  })

  it('puts the rest back when the look at the head fails, and rejects with that failure', async () => {
    await fill('classic', 3)
    const reader = new QueueReader(transport, 'classic')
    await reader.next()
    await reader.next()
    const gone = new Error('channel closed')
    transport.locked.set('classic', gone)
    await expect(reader.giveBack()).rejects.toBe(gone)
    expect(ids('classic')).toEqual(['m-1', 'm-2', 'm-3'])
  })

  it('goes round a queue that puts the first message behind the others, to the first message', async () => {
    await fill('round', 4)
    const reader = new QueueReader(transport, 'round')
    await reader.next()
    await reader.next()
    expect(await reader.giveBack()).toEqual({ returned: 5, cycled: true })
    expect(ids('round')).toEqual(['m-1', 'm-2', 'm-3', 'm-4'])
  })

  it('puts back what it took on its way round when the broker fails under it', async () => {
    await fill('round', 4)
    const reader = new QueueReader(transport, 'round')
    await reader.next()
    const getOne = InMemoryTransport.prototype.getOne.bind(transport)
    let gets = 0
    transport.getOne = async (queue) => {
      if (++gets > 2) throw new Error('channel closed')
      return getOne(queue)
    }
    await expect(reader.giveBack()).rejects.toThrow('channel closed')
    expect([...ids('round')].sort()).toEqual(['m-1', 'm-2', 'm-3', 'm-4'])
  })

  it('stops going round at an empty queue when the first message is no longer there', async () => {
    await fill('round', 3)
    const reader = new QueueReader(transport, 'round')
    await reader.next()
    const getOne = InMemoryTransport.prototype.getOne.bind(transport)
    transport.getOne = async (queue) => {
      const delivery = await getOne(queue)
      // Another consumer takes the first message as soon as it is back.
      if (delivery?.headers['x-acemq-id'] === 'm-1') {
        delivery.ack()
        return getOne(queue)
      }
      return delivery
    }
    expect(await reader.giveBack()).toEqual({ returned: 3, cycled: true })
    expect(ids('round')).toEqual(['m-2', 'm-3'])
  })

  it.each([
    ['the message given back', { redelivered: true, id: 'a', body: 'x' }, false],
    ['a message not redelivered', { redelivered: false, id: 'a', body: 'x' }, true],
    ['a message with another id', { redelivered: true, id: 'b', body: 'x' }, true],
    ['a message with another body', { redelivered: true, id: 'a', body: 'y' }, true],
    ['one of another length', { redelivered: true, id: 'a', body: 'xx' }, true],
  ])('given back, finds %s at the head', async (_, head, cycled) => {
    const script = scripted([
      { redelivered: false, id: 'a', body: 'x' },
      head,
      { redelivered: true, id: 'a', body: 'x' },
    ])
    const reader = new QueueReader(script.transport, 'q')
    await reader.next()
    expect(await reader.giveBack()).toEqual({ returned: cycled ? 3 : 2, cycled })
  })

  it('gives each message back once when the look at the head fails', async () => {
    const nacks = new Map<string, number>()
    const script = scripted(
      [
        { redelivered: false, id: 'a', body: 'x' },
        { redelivered: false, id: 'b', body: 'y' },
      ],
      nacks,
    )
    const reader = new QueueReader(script.transport, 'q')
    await reader.next()
    await reader.next()
    script.fail(new Error('channel closed'))
    await expect(reader.giveBack()).rejects.toThrow('channel closed')
    expect(Object.fromEntries(nacks)).toEqual({ a: 1, b: 1 })
  })

  it('recognises a message with no id by its body, and a foreign one by its message-id', async () => {
    const bare = scripted([
      { redelivered: false, id: undefined, body: 'x' },
      { redelivered: true, id: undefined, body: 'x' },
    ])
    const reader = new QueueReader(bare.transport, 'q')
    await reader.next()
    expect(await reader.giveBack()).toEqual({ returned: 2, cycled: false })
    const foreign = scripted([
      { redelivered: false, messageId: 'f-1', body: 'x' },
      { redelivered: true, messageId: 'f-2', body: 'x' },
      { redelivered: true, messageId: 'f-1', body: 'x' },
    ])
    const other = new QueueReader(foreign.transport, 'q')
    await other.next()
    expect(await other.giveBack()).toEqual({ returned: 3, cycled: true })
  })
})

interface Scripted {
  readonly redelivered: boolean
  readonly id?: string | undefined
  readonly messageId?: string
  readonly body: string
}

/**
 * A transport whose basic.get answers the given messages in turn, then nothing, or fails once
 * told to; `nacks` counts the give-backs of each id.
 */
function scripted(
  messages: readonly Scripted[],
  nacks = new Map<string, number>(),
): {
  transport: ConstructorParameters<typeof QueueReader>[0]
  fail(error: unknown): void
} {
  const left = [...messages]
  let failure: unknown
  const transport = {
    kind: 'scripted',
    getOne: async (): Promise<Delivery | undefined> => {
      if (failure !== undefined) throw failure
      const next = left.shift()
      if (next === undefined) return undefined
      return {
        body: Buffer.from(next.body),
        headers: next.id === undefined ? {} : { 'x-acemq-id': next.id },
        properties: next.messageId === undefined ? {} : { messageId: next.messageId },
        exchange: '',
        routingKey: 'q',
        redelivered: next.redelivered,
        ack: () => true,
        nack: () => {
          const id = String(next.id)
          nacks.set(id, (nacks.get(id) ?? 0) + 1)
          return true
        },
      } as unknown as Delivery
    },
    queueLength: async () => left.length,
  }
  return {
    transport: transport as unknown as ConstructorParameters<typeof QueueReader>[0],
    fail: (error) => (failure = error),
  }
}
