import { afterEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  Ack,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  InMemoryTransport,
  Topology,
  readEnvelope,
  type ClaimingIdempotencyStore,
  type Consumer,
  type OutgoingMessage,
} from '../../src/index.js'
import { RecordingTransport } from '../../../../test-support/recording-transport.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function eventually(
  condition: () => boolean,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await sleep(5)
  }
}

/** A gate a handler waits at until the test opens it. */
function gate(): { wait: Promise<void>; open(): void } {
  let open!: () => void
  const wait = new Promise<void>((resolve) => (open = resolve))
  return { wait, open }
}

interface Setup {
  readonly memory: InMemoryTransport
  readonly transport: RecordingTransport
  readonly mq: AceMq
  readonly errors: string[]
}

describe('the engine at its edges (in memory)', () => {
  let setup: Setup | undefined
  afterEach(async () => {
    await setup?.mq.close({ drainTimeout: 0 })
    setup = undefined
  })

  async function open(queue: string): Promise<Setup> {
    const memory = new InMemoryTransport()
    const transport = new RecordingTransport(memory)
    const errors: string[] = []
    const mq = await AceMq.connect(transport, { onError: (_e, context) => errors.push(context) })
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    setup = { memory, transport, mq, errors }
    return setup
  }

  it('lets a running handler publish while a graceful close drains it', async () => {
    const { mq, memory } = await open('drain-publish')
    await mq.applyTopology(Topology.define().queue('drain-publish.out'))
    const inside = gate()
    const proceed = gate()
    let published: unknown = 'not yet'
    await mq.consume('drain-publish', ConsumerOptions.defaults(), async () => {
      inside.open()
      await proceed.wait
      published = await mq
        .publisher('', 'drain-publish.out')
        .send({ done: true })
        .then(
          () => 'confirmed',
          (error: unknown) => error,
        )
    })
    await mq.publisher('', 'drain-publish').send({})
    await inside.wait
    const closing = mq.close()
    await sleep(20)
    proceed.open()
    await closing
    expect(published).toBe('confirmed')
    expect(memory.messageCount('drain-publish.out')).toBe(1)
    // After the drain, a publish is refused.
    await expect(mq.publisher('', 'drain-publish.out').send({})).rejects.toThrow(/closed/)
  })

  for (const how of ['drainConsumers', 'consumer.close', 'mq.close'] as const) {
    it(`does not wait for itself when ${how}() is called from a handler while another handler runs`, async () => {
      const { mq } = await open(`self-${how}`)
      const bBusy = gate()
      let consumer: Consumer | undefined
      let took = -1
      let bDone = 0
      consumer = await mq.consume(
        `self-${how}`,
        ConsumerOptions.defaults().withConcurrency(2),
        async (message) => {
          if ((message.payload as { who: string }).who === 'b') {
            await bBusy.wait
            bDone = Date.now()
            return
          }
          setTimeout(() => bBusy.open(), 100)
          const began = Date.now()
          if (how === 'drainConsumers') await mq.drainConsumers('10s')
          else if (how === 'consumer.close') await consumer?.close({ drainTimeout: '10s' })
          else await mq.close({ drainTimeout: '10s' })
          took = Date.now() - began
        },
      )
      await mq.publisher('', `self-${how}`).send({ who: 'b' })
      await eventually(() => mq.inFlight === 1)
      await mq.publisher('', `self-${how}`).send({ who: 'a' })
      await eventually(() => took >= 0, 8_000, `${how} to return`)
      // It waited for the other handler (~100 ms), not for itself until a timeout.
      expect(bDone).toBeGreaterThan(0)
      expect(took).toBeGreaterThanOrEqual(90)
      expect(took).toBeLessThan(1_500)
      consumer = undefined
    })
  }

  it('never lets a delivery started from inside a handler borrow that handler’s identity: a drain waits for both', async () => {
    const { mq } = await open('borrowed')
    const aRelease = gate()
    const bRelease = gate()
    let aDone = false
    await mq.consume('borrowed', ConsumerOptions.defaults().withConcurrency(2), async (message) => {
      if ((message.payload as { who: string }).who === 'a') {
        // Published from inside A: the in-memory transport delivers it from A's async context.
        await mq.publisher('', 'borrowed').send({ who: 'b' })
        await aRelease.wait
        aDone = true
      } else {
        await bRelease.wait
      }
    })
    await mq.publisher('', 'borrowed').send({ who: 'a' })
    await eventually(() => mq.inFlight === 2)
    let drained: boolean | undefined
    void mq.drainConsumers('5s').then((result) => (drained = result))
    bRelease.open()
    await eventually(() => mq.inFlight === 1)
    await sleep(50)
    // A still runs: the drain must not have answered.
    expect(drained).toBeUndefined()
    aRelease.open()
    await eventually(() => drained !== undefined)
    expect(drained).toBe(true)
    expect(aDone).toBe(true)
  })

  it('keeps other deliveries flowing while one waits out a consumer-side retry delay', async () => {
    const { mq } = await open('slot')
    const handled: string[] = []
    let failedOnce = false
    await mq.consume('slot', ConsumerOptions.defaults(), (message) => {
      const id = message.envelope.id
      if (id === 'slow' && !failedOnce) {
        failedOnce = true
        return Ack.retry('not yet', 2_000)
      }
      handled.push(id)
      return undefined
    })
    await mq.publisher('', 'slot').send({}, { id: 'slow' })
    await eventually(() => failedOnce)
    const began = Date.now()
    await mq.publisher('', 'slot').send({}, { id: 'next' })
    await eventually(() => handled.includes('next'), 1_500, 'the next message')
    expect(Date.now() - began).toBeLessThan(1_000)
    expect(mq.waiting).toBe(1)
    expect(mq.inFlight).toBe(0)
    await eventually(() => handled.includes('slow'), 5_000, 'the retried message')
  })

  it('treats a handler’s own return value that merely has a kind field as accept', async () => {
    const { mq, transport, memory } = await open('orm-row')
    const rows = [
      { kind: 'release', id: 1 },
      { kind: 'park', reason: 'a column', id: 2 },
      { kind: 'dead-letter', reason: 'a column', id: 3 },
      { kind: 'retry', reason: 'a column', id: 4 },
    ]
    let calls = 0
    await mq.consume('orm-row', ConsumerOptions.defaults(), () => rows[calls++])
    for (const [i] of rows.entries()) await mq.publisher('', 'orm-row').send({}, { id: `row-${i}` })
    await eventually(() => transport.settlements.length === rows.length)
    expect(calls).toBe(rows.length)
    expect(transport.settlements.map((s) => s.kind)).toEqual(['ack', 'ack', 'ack', 'ack'])
    expect(memory.messageCount('orm-row.dlq') + memory.messageCount('orm-row.parked')).toBe(0)
  })

  it('keeps a handler waiting through drainConsumers(30d): the long timeout does not fire at once', async () => {
    const { mq, transport } = await open('long-drain')
    const release = gate()
    await mq.consume('long-drain', ConsumerOptions.defaults(), async () => {
      await release.wait
    })
    await mq.publisher('', 'long-drain').send({}, { id: 'long' })
    await eventually(() => mq.inFlight === 1)
    let drained: boolean | undefined
    void mq.drainConsumers('30d').then((result) => (drained = result))
    await sleep(100)
    expect(drained).toBeUndefined()
    release.open()
    await eventually(() => drained !== undefined)
    expect(drained).toBe(true)
    expect(transport.settlementsOf('long')).toEqual([
      expect.objectContaining({ kind: 'ack', written: true }),
    ])
  })

  it('keeps x-acemq-* headers it does not know on retry and dead-letter copies', async () => {
    const { mq, memory, transport } = await open('route-headers')
    let calls = 0
    await mq.consume('route-headers', ConsumerOptions.defaults().withRetryDelay('10ms'), () =>
      ++calls === 1 ? Ack.retry('once') : Ack.deadLetter('then give up'),
    )
    const foreign: OutgoingMessage = {
      exchange: '',
      routingKey: 'route-headers',
      body: Buffer.from('{}'),
      headers: {
        'x-acemq-id': 'routed-1',
        'x-acemq-attempt': { '!': 'int', value: 1 },
        'x-acemq-route': 'route-headers,next.step',
        'x-acemq-route-position': { '!': 'int', value: 0 },
        'x-acemq-route-id': 'run-7',
        'x-app-count': { '!': 'long', value: 5 },
      },
      properties: { contentType: 'application/json', messageId: 'routed-1' },
      persistent: true,
      mandatory: true,
    }
    await memory.publish(foreign)
    await eventually(() => memory.messageCount('route-headers.dlq') === 1)
    const retryCopy = transport.published.find((m) => m.routingKey === 'route-headers')
    const dlqCopy = memory.peek('route-headers.dlq')[0]
    for (const headers of [retryCopy?.headers, dlqCopy?.headers]) {
      expect(headers).toMatchObject({
        'x-acemq-route': 'route-headers,next.step',
        'x-acemq-route-position': { '!': 'int', value: 0 },
        'x-acemq-route-id': 'run-7',
        'x-app-count': { '!': 'long', value: 5 },
      })
    }
    expect(readEnvelope(retryCopy?.headers, { routingKey: 'x' }).envelope.attempt).toBe(2)
    expect(dlqCopy?.headers['x-acemq-error']).toBe('then give up')
    expect(retryCopy?.headers['x-acemq-error']).toBeUndefined()
  })

  it('times out a store call that hangs, counts it as a store failure, reports DEGRADED and recovers', async () => {
    const { mq, errors } = await open('hung-store')
    const inner = new InMemoryIdempotencyStore()
    let hang = true
    const store: ClaimingIdempotencyStore = {
      tryClaim: (id, owner) => (hang ? new Promise(() => undefined) : inner.tryClaim(id, owner)),
      claim: (id, owner) => inner.claim(id, owner),
      confirm: (id, owner) => inner.confirm(id, owner),
      release: (id, owner) => inner.release(id, owner),
      isConfirmed: (id) => inner.isConfirmed(id),
    }
    let calls = 0
    await mq.consume(
      'hung-store',
      ConsumerOptions.defaults()
        .idempotent(store)
        .withStoreTimeout('100ms')
        .withInProgressDelay('50ms'),
      () => {
        calls++
      },
    )
    await mq.publisher('', 'hung-store').send({}, { id: 'stuck' })
    await eventually(() => errors.some((e) => e.includes('could not claim')), 2_000)
    const health = await mq.health()
    expect(health.status).toBe('DEGRADED')
    expect(health.reports.find((r) => r.name === 'consumers')).toMatchObject({
      status: 'DEGRADED',
      details: {
        failingStore: 'hung-store',
        storeError: expect.stringMatching(/did not answer within 100 ms/),
      },
    })
    expect(calls).toBe(0)
    hang = false
    await eventually(() => calls === 1, 3_000, 'the handler once the store answers')
    await eventually(() => mq.inFlight === 0)
    expect((await mq.health()).status).toBe('UP')
  })
})
