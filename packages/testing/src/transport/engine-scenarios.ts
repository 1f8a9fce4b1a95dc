import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConsumerOptions,
  FatalError,
  RetryPolicy,
  Topology,
  UnroutableError,
  type Consumer,
  type Envelope,
  type Headers,
  type Message,
  type AceMqOptions,
} from '@acemq/core'
import { readEnvelope, type Transport } from '@acemq/core/spi'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'

/** A message read back from a queue, from outside the library. */
export interface InspectedMessage {
  readonly body: Uint8Array
  readonly headers: Headers
  readonly contentType: string | undefined
  readonly messageId: string | undefined
}

/** How a scenario looks at the broker behind a transport, from outside the library. */
export interface BrokerProbe {
  /** Ready messages in `queue`; undefined when it does not exist. */
  count(queue: string): Promise<number | undefined>
  /** Takes the oldest ready message. */
  get(queue: string): Promise<InspectedMessage | undefined>
  /** Publishes raw bytes to a queue through the default exchange, as a foreign client would. */
  sendRaw(
    queue: string,
    body: Uint8Array,
    properties: { contentType?: string; headers?: Headers; messageId?: string },
  ): Promise<void>
  deleteQueue(queue: string): Promise<void>
}

/** What each transport under test provides. */
export interface ScenarioTarget {
  /** A new, unconnected transport. */
  createTransport(): Transport
  /** A probe that looks at the broker behind `transport` from outside the library. */
  probe(transport: Transport): Promise<BrokerProbe & { close(): Promise<void> }>
}

/** One scenario's connection: the library on a fresh transport, and a probe beside it. */
export interface ScenarioConnection<T extends Transport = Transport> {
  readonly transport: T
  readonly mq: AceMq
  readonly probe: BrokerProbe & { close(): Promise<void> }
}

/** Connects `AceMq` to a new transport of `target` (wrapped by `wrap`) and opens a probe. */
export async function openScenario<T extends Transport = Transport>(
  target: ScenarioTarget,
  wrap: (inner: Transport) => T = (inner) => inner as T,
  options: AceMqOptions = {},
): Promise<ScenarioConnection<T>> {
  const inner = target.createTransport()
  const transport = wrap(inner)
  const mq = await AceMq.connect(transport, options)
  return { transport, mq, probe: await target.probe(inner) }
}

/**
 * Closes a scenario's connection at once, deletes its queues with their dead-letter, parking
 * and retry queues (`queues` is emptied), then closes the probe.
 */
export async function closeScenario(
  { mq, probe }: ScenarioConnection,
  queues: string[],
): Promise<void> {
  await mq.close({ drainTimeout: 0 })
  for (const q of queues.splice(0)) {
    for (const suffix of ['', '.dlq', '.parked', '.retry.1s', '.retry.300ms'])
      await probe.deleteQueue(q + suffix)
  }
  await probe.close()
}

function envelopeOf(message: InspectedMessage, queue: string): Envelope {
  return readEnvelope(message.headers, { messageId: message.messageId, routingKey: queue }).envelope
}

/**
 * The engine scenarios of docs/design.md §6, run against every transport: the in-memory one and the
 * real broker. Each scenario uses its own queue.
 */
export function engineScenarios(name: string, target: ScenarioTarget): void {
  describe(`the consumer engine on ${name}`, () => {
    let mq: AceMq
    let probe: BrokerProbe & { close(): Promise<void> }
    let connection: ScenarioConnection
    const queues: string[] = []
    const consumers: Consumer[] = []

    beforeEach(async () => {
      connection = await openScenario(target)
      ;({ mq, probe } = connection)
    })

    afterEach(async () => {
      for (const consumer of consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
      await closeScenario(connection, queues)
    })

    async function queueWith(policy?: RetryPolicy): Promise<string> {
      const q = uniqueName('engine')
      queues.push(q)
      const topology = policy
        ? Topology.define().queueWithRetry(q, policy)
        : Topology.define().queueWithDeadLetter(q)
      await mq.applyTopology(topology)
      return q
    }

    async function consume<T>(
      q: string,
      options: ConsumerOptions,
      handler: (m: Message<T>) => unknown,
    ): Promise<Consumer> {
      const consumer = await mq.consume<T>(q, options, async (m) => (await handler(m)) as never)
      consumers.push(consumer)
      return consumer
    }

    it('moves an exhausted message to {q}.dlq once, with the reason and its envelope intact', async () => {
      const q = await queueWith(RetryPolicy.fixed(3, 10))
      const attempts: number[] = []
      await consume(q, ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(3, 10)), (m) => {
        attempts.push(m.envelope.attempt)
        throw new Error('payment service down')
      })
      await mq
        .publisher('', q)
        .send({ id: 'o-1' }, { correlation: 'checkout-7', headers: { 'x-tenant': 'acme' } })
      await eventually(
        async () => (await probe.count(`${q}.dlq`)) === 1,
        10_000,
        'a copy on the dlq',
      )
      const copy = (await probe.get(`${q}.dlq`)) as InspectedMessage
      const envelope = envelopeOf(copy, q)
      expect(attempts).toEqual([1, 2, 3])
      expect(envelope.error).toBe('gave up after 3 attempt(s): payment service down')
      expect(envelope.attempt).toBe(3)
      expect(envelope.correlation).toBe('checkout-7')
      expect(envelope.type).toBe(q)
      expect(copy.headers['x-tenant']).toBe('acme')
      expect(JSON.parse(Buffer.from(copy.body).toString())).toEqual({ id: 'o-1' })
      expect(copy.contentType).toBe('application/json')
      expect(await probe.count(q)).toBe(0)
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(await probe.count(`${q}.dlq`)).toBe(0)
    })

    it('carries the attempt and keeps id, first-seen and origin across retries', async () => {
      const q = await queueWith(RetryPolicy.fixed(3, 10))
      const seen: Envelope[] = []
      await consume(q, ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(3, 10)), (m) => {
        seen.push(m.envelope)
        if (m.envelope.attempt < 3) throw new Error('not yet')
      })
      await mq
        .publisher('', q)
        .send('hello', { id: 'fixed-id', origin: 'orders@host-1', claim: 'blob://orders/7' })
      await eventually(() => seen.length === 3, 10_000, 'three attempts')
      // Another library's claim pointer is carried on every hop, never dropped.
      expect(new Set(seen.map((e) => e.claim))).toEqual(new Set(['blob://orders/7']))
      expect(seen.map((e) => e.attempt)).toEqual([1, 2, 3])
      expect(new Set(seen.map((e) => e.id))).toEqual(new Set(['fixed-id']))
      expect(new Set(seen.map((e) => e.firstSeen)).size).toBe(1)
      expect(new Set(seen.map((e) => e.origin))).toEqual(new Set(['orders@host-1']))
    })

    it('spends a broker wait in {q}.retry.1s and gets the message back', async () => {
      const policy = RetryPolicy.fixed(2, '1s').waitInBrokerFrom('1s')
      const q = await queueWith(policy)
      const times: number[] = []
      await consume(q, ConsumerOptions.defaults().withRetry(policy), (m) => {
        times.push(Date.now())
        if (m.envelope.attempt === 1) throw new Error('later')
      })
      await mq.publisher('', q).send({ n: 1 })
      await eventually(
        async () => (await probe.count(`${q}.retry.1s`)) === 1,
        5_000,
        'the message in the rung',
      )
      await eventually(() => times.length === 2, 10_000, 'the second attempt')
      expect((times[1] as number) - (times[0] as number)).toBeGreaterThanOrEqual(950)
      expect(await probe.count(`${q}.retry.1s`)).toBe(0)
    })

    it('retries forever with the handler’s delay when there is no policy', async () => {
      const q = await queueWith()
      let calls = 0
      const started = Date.now()
      await consume(q, ConsumerOptions.defaults(), () => {
        calls++
        if (calls < 6) return Ack.retry('not ready', 20)
        return undefined
      })
      await mq.publisher('', q).send({})
      await eventually(() => calls === 6, 10_000, 'six calls')
      expect(Date.now() - started).toBeLessThan(4_000)
      await eventually(() => mq.inFlight === 0)
      expect(await probe.count(`${q}.dlq`)).toBe(0)
      expect(await probe.count(q)).toBe(0)
    })

    it('lets the policy override the delay the handler asks for', async () => {
      const policy = RetryPolicy.fixed(3, 10)
      const q = await queueWith(policy)
      let calls = 0
      await consume(q, ConsumerOptions.defaults().withRetry(policy), () => {
        calls++
        return Ack.retry('slow down', '1h')
      })
      await mq.publisher('', q).send({})
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 5_000, 'the dlq copy')
      expect(calls).toBe(3)
    })

    it('dead-letters a FatalError at once, whatever the policy', async () => {
      const policy = RetryPolicy.fixed(5, 10)
      const q = await queueWith(policy)
      let calls = 0
      await consume(q, ConsumerOptions.defaults().withRetry(policy), () => {
        calls++
        throw new FatalError('order has no customer')
      })
      await mq.publisher('', q).send({})
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 5_000, 'the dlq copy')
      const copy = (await probe.get(`${q}.dlq`)) as InspectedMessage
      expect(envelopeOf(copy, q).error).toBe('order has no customer')
      expect(envelopeOf(copy, q).attempt).toBe(1)
      expect(calls).toBe(1)
    })

    it('dead-letters on Ack.deadLetter and parks on Ack.park, each with its reason', async () => {
      const q = await queueWith()
      await consume<{ kind: string }>(q, ConsumerOptions.defaults(), (m) =>
        m.payload.kind === 'dead'
          ? Ack.deadLetter('refund window closed')
          : Ack.park('needs a person'),
      )
      const publisher = mq.publisher('', q)
      await publisher.send({ kind: 'dead' })
      await publisher.send({ kind: 'park' })
      await eventually(
        async () =>
          (await probe.count(`${q}.dlq`)) === 1 && (await probe.count(`${q}.parked`)) === 1,
      )
      expect(envelopeOf((await probe.get(`${q}.dlq`)) as InspectedMessage, q).error).toBe(
        'refund window closed',
      )
      expect(envelopeOf((await probe.get(`${q}.parked`)) as InspectedMessage, q).error).toBe(
        'needs a person',
      )
    })

    it('parks a body that does not decode and never runs the handler for it', async () => {
      const q = await queueWith(RetryPolicy.fixed(5, 10))
      let calls = 0
      await consume(q, ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(5, 10)), () => {
        calls++
      })
      await probe.sendRaw(q, Buffer.from('{not json'), { contentType: 'application/json' })
      await eventually(
        async () => (await probe.count(`${q}.parked`)) === 1,
        5_000,
        'the parked copy',
      )
      const copy = (await probe.get(`${q}.parked`)) as InspectedMessage
      expect(envelopeOf(copy, q).error).toMatch(/^could not decode: /)
      expect(Buffer.from(copy.body).toString()).toBe('{not json')
      expect(calls).toBe(0)
      expect(await probe.count(`${q}.dlq`)).toBe(0)
    })

    it('hands a released message back with its attempt unchanged', async () => {
      const q = await queueWith()
      const attempts: number[] = []
      await consume(q, ConsumerOptions.defaults(), (m) => {
        attempts.push(m.envelope.attempt)
        return attempts.length < 3 ? Ack.release() : undefined
      })
      await mq.publisher('', q).send({})
      await eventually(() => attempts.length === 3)
      expect(attempts).toEqual([1, 1, 1])
    })

    it('never loses a message whose dlq was deleted: it holds it, declares the dlq again and moves it there', async () => {
      const q = await queueWith()
      let calls = 0
      await consume(q, ConsumerOptions.defaults(), () => {
        calls++
        return Ack.deadLetter('bad order')
      })
      await probe.deleteQueue(`${q}.dlq`)
      await mq.publisher('', q).send({ id: 'precious' })
      await eventually(
        async () => (await probe.count(`${q}.dlq`)) === 1,
        10_000,
        'the copy on the dlq the consumer declared again',
      )
      const copy = (await probe.get(`${q}.dlq`)) as InspectedMessage
      expect(JSON.parse(Buffer.from(copy.body).toString())).toEqual({ id: 'precious' })
      // Held and tried again in the consumer: never handed back to spin through the handler
      // (and the broker's delivery limit).
      expect(calls).toBe(1)
      expect(await probe.count(q)).toBe(0)
    })

    it('shares one attempt count between two consumers of the same queue', async () => {
      const policy = RetryPolicy.fixed(4, 10)
      const q = await queueWith(policy)
      const attempts: number[] = []
      const handler = (m: Message<unknown>): never => {
        attempts.push(m.envelope.attempt)
        throw new Error('always')
      }
      await consume(q, ConsumerOptions.defaults().withRetry(policy), handler)
      await consume(q, ConsumerOptions.defaults().withRetry(policy), handler)
      await mq.publisher('', q).send({})
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 10_000, 'the dlq copy')
      expect(attempts).toEqual([1, 2, 3, 4])
    })

    it('declares its dead-letter queue itself on a queue declared without one', async () => {
      const q = uniqueName('engine')
      queues.push(q)
      await mq.applyTopology(Topology.define().queue(q))
      expect(await probe.count(`${q}.dlq`)).toBeUndefined()
      await consume(q, ConsumerOptions.defaults(), () =>
        Ack.deadLetter('no topology was declared for me'),
      )
      expect(await probe.count(`${q}.dlq`)).toBe(0)
      expect(await probe.count(`${q}.parked`)).toBe(0)
      await mq.publisher('', q).send({})
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 5_000, 'the dlq copy')
    })

    it('rejects an unroutable publish with UnroutableError', async () => {
      await expect(mq.publisher('', uniqueName('nowhere')).send({})).rejects.toBeInstanceOf(
        UnroutableError,
      )
    })
  })
}
