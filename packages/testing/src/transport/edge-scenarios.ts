import { afterEach, describe, expect, it } from 'vitest'
import {
  Ack,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  Topology,
  type AceMq,
  type Consumer,
} from '@acemq/core'
import { readEnvelope, type ClaimingIdempotencyStore } from '@acemq/core/spi'
import {
  closeScenario,
  openScenario,
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'
import { RecordingTransport } from './recording-transport.js'
import { uniqueName } from '../services/services.js'
import { sleep } from '../helpers/eventually.js'

async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
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

/**
 * The engine at its edges — publishes during a drain, closes and drains from inside handlers,
 * task identity, waits that must not hold a handler slot, odd return values, long timeouts,
 * headers on copies, hung stores — run against every transport.
 */
export function edgeScenarios(name: string, target: ScenarioTarget): void {
  describe(`the engine at its edges on ${name}`, () => {
    let connection: ScenarioConnection<RecordingTransport> | undefined
    let errors: string[] = []
    const queues: string[] = []

    afterEach(async () => {
      if (connection !== undefined) await closeScenario(connection, queues)
      connection = undefined
    })

    async function open(prefix: string): Promise<{
      readonly mq: AceMq
      readonly transport: RecordingTransport
      readonly probe: BrokerProbe
      readonly q: string
      readonly errors: string[]
    }> {
      errors = []
      connection = await openScenario(target, (inner) => new RecordingTransport(inner), {
        onError: (_error, context) => errors.push(context),
      })
      const q = uniqueName(prefix)
      queues.push(q)
      await connection.mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return {
        mq: connection.mq,
        transport: connection.transport,
        probe: connection.probe,
        q,
        errors,
      }
    }

    it('lets a running handler publish while a graceful close drains it', async () => {
      const { mq, probe, q } = await open('drain-publish')
      const out = `${q}.out`
      queues.push(out)
      await mq.applyTopology(Topology.define().queue(out))
      const inside = gate()
      const proceed = gate()
      let published: unknown = 'not yet'
      await mq.consume(q, ConsumerOptions.defaults(), async () => {
        inside.open()
        await proceed.wait
        published = await mq
          .publisher('', out)
          .send({ done: true })
          .then(
            () => 'confirmed',
            (error: unknown) => error,
          )
      })
      await mq.publisher('', q).send({})
      await inside.wait
      const closing = mq.close()
      await sleep(20)
      proceed.open()
      await closing
      expect(published).toBe('confirmed')
      await eventually(async () => (await probe.count(out)) === 1, 5_000, 'the published copy')
      // After the drain, a publish is refused.
      await expect(mq.publisher('', out).send({})).rejects.toThrow(/closed/)
    })

    for (const how of ['drainConsumers', 'consumer.close', 'mq.close'] as const) {
      it(`does not wait for itself when ${how}() is called from a handler while another handler runs`, async () => {
        const { mq, q } = await open('self')
        const bBusy = gate()
        let consumer: Consumer | undefined
        let took = -1
        let bDone = 0
        consumer = await mq.consume(
          q,
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
        await mq.publisher('', q).send({ who: 'b' })
        await eventually(() => mq.inFlight === 1)
        await mq.publisher('', q).send({ who: 'a' })
        await eventually(() => took >= 0, 8_000, `${how} to return`)
        // It waited for the other handler (~100 ms), not for itself until a timeout.
        expect(bDone).toBeGreaterThan(0)
        expect(took).toBeGreaterThanOrEqual(90)
        expect(took).toBeLessThan(2_000)
        consumer = undefined
      })
    }

    it('never lets a delivery started from inside a handler borrow that handler’s identity: a drain waits for both', async () => {
      const { mq, q } = await open('borrowed')
      const aRelease = gate()
      const bRelease = gate()
      let aDone = false
      await mq.consume(q, ConsumerOptions.defaults().withConcurrency(2), async (message) => {
        if ((message.payload as { who: string }).who === 'a') {
          // Published from inside A: an in-process transport delivers it from A's async context.
          await mq.publisher('', q).send({ who: 'b' })
          await aRelease.wait
          aDone = true
        } else {
          await bRelease.wait
        }
      })
      await mq.publisher('', q).send({ who: 'a' })
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
      const { mq, q } = await open('slot')
      const handled: string[] = []
      let failedOnce = false
      await mq.consume(q, ConsumerOptions.defaults(), (message) => {
        const id = message.envelope.id
        if (id === 'slow' && !failedOnce) {
          failedOnce = true
          return Ack.retry('not yet', 2_000)
        }
        handled.push(id)
        return undefined
      })
      await mq.publisher('', q).send({}, { id: 'slow' })
      await eventually(() => failedOnce)
      const began = Date.now()
      await mq.publisher('', q).send({}, { id: 'next' })
      await eventually(() => handled.includes('next'), 1_500, 'the next message')
      expect(Date.now() - began).toBeLessThan(1_000)
      expect(mq.waiting).toBe(1)
      expect(mq.inFlight).toBe(0)
      await eventually(() => handled.includes('slow'), 5_000, 'the retried message')
    })

    it('treats a handler’s own return value that merely has a kind field as accept', async () => {
      const { mq, transport, probe, q } = await open('orm-row')
      const rows = [
        { kind: 'release', id: 1 },
        { kind: 'park', reason: 'a column', id: 2 },
        { kind: 'dead-letter', reason: 'a column', id: 3 },
        { kind: 'retry', reason: 'a column', id: 4 },
      ]
      let calls = 0
      // As a handler written in JavaScript (or typed loosely) could return a database row.
      await mq.consume(q, ConsumerOptions.defaults(), (() => rows[calls++]) as never)
      for (const [i] of rows.entries()) await mq.publisher('', q).send({}, { id: `row-${i}` })
      await eventually(() => transport.settlements.length === rows.length)
      await sleep(50)
      expect(calls).toBe(rows.length)
      expect(transport.settlements.map((s) => s.kind)).toEqual(['ack', 'ack', 'ack', 'ack'])
      expect(await probe.count(`${q}.dlq`)).toBe(0)
      expect(await probe.count(`${q}.parked`)).toBe(0)
    })

    it('keeps a handler waiting through drainConsumers(30d): the long timeout does not fire at once', async () => {
      const { mq, transport, q } = await open('long-drain')
      const release = gate()
      await mq.consume(q, ConsumerOptions.defaults(), async () => {
        await release.wait
      })
      await mq.publisher('', q).send({}, { id: 'long' })
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

    it('keeps x-acemq-* headers it does not know, and header types, on retry and dead-letter copies', async () => {
      const { mq, probe, transport, q } = await open('route-headers')
      let calls = 0
      await mq.consume(q, ConsumerOptions.defaults().withRetryDelay('10ms'), () =>
        ++calls === 1 ? Ack.retry('once') : Ack.deadLetter('then give up'),
      )
      // As another AceMQ library writes a pipeline hop.
      await probe.sendRaw(q, Buffer.from('{}'), {
        contentType: 'application/json',
        messageId: 'routed-1',
        headers: {
          'x-acemq-id': 'routed-1',
          'x-acemq-attempt': { '!': 'int', value: 1 },
          'x-acemq-route': `${q},next.step`,
          'x-acemq-route-position': { '!': 'int', value: 0 },
          'x-acemq-route-id': 'run-7',
          'x-app-count': { '!': 'long', value: 5 },
        },
      })
      await eventually(async () => (await probe.count(`${q}.dlq`)) === 1, 5_000, 'the dlq copy')
      // The broker may show the copy before its confirm reaches the engine.
      const copiesOf = (): typeof transport.published =>
        transport.published.filter((m) => m.properties.messageId === 'routed-1')
      await eventually(() => copiesOf().length === 2, 5_000, 'both copies confirmed')
      const copies = copiesOf()
      expect(copies.map((m) => m.routingKey)).toEqual([q, `${q}.dlq`])
      // The engine's copies go on its own lane, apart from application publishes.
      expect(copies.map((m) => transport.lanes.get(m))).toEqual(['engine', 'engine'])
      for (const copy of copies) {
        // As written: each header keeps its wire type.
        expect(copy.headers).toMatchObject({
          'x-acemq-route': `${q},next.step`,
          'x-acemq-route-position': { '!': 'int', value: 0 },
          'x-acemq-route-id': 'run-7',
          'x-app-count': { '!': 'long', value: 5 },
        })
      }
      expect(readEnvelope(copies[0]?.headers, { routingKey: q }).envelope.attempt).toBe(2)
      expect(copies[0]?.headers['x-acemq-error']).toBeUndefined()
      // As read back from the dlq by a foreign client.
      const dlq = await probe.get(`${q}.dlq`)
      expect(dlq?.headers).toMatchObject({
        'x-acemq-route': `${q},next.step`,
        'x-acemq-route-id': 'run-7',
        'x-acemq-error': 'then give up',
      })
    })

    it('stops counting a handler in inFlight once a close has given up on it', async () => {
      const { mq, q } = await open('abandoned')
      let finished = false
      const consumer = await mq.consume(q, ConsumerOptions.defaults(), async () => {
        // Ignores its signal and outlives the close's grace.
        await sleep(6_500)
        finished = true
      })
      await mq.publisher('', q).send({}, { id: 'stubborn' })
      await eventually(() => mq.inFlight === 1)
      await consumer.close({ drainTimeout: 0 })
      // Given up on after the 5 s grace: nothing waits for it, and nothing counts it.
      expect(finished).toBe(false)
      expect(mq.inFlight).toBe(0)
      expect(await mq.drainConsumers(0)).toBe(true)
      expect((await mq.health()).inFlight).toBe(0)
      await eventually(() => finished, 5_000, 'the abandoned handler to return')
      expect(mq.inFlight).toBe(0)
    }, 20_000)

    it('times out a store call that hangs, counts it as a store failure, reports DEGRADED and recovers', async () => {
      const { mq, q } = await open('hung-store')
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
        q,
        ConsumerOptions.defaults()
          .idempotent(store)
          .withStoreTimeout('100ms')
          .withInProgressDelay('50ms'),
        () => {
          calls++
        },
      )
      await mq.publisher('', q).send({}, { id: 'stuck' })
      await eventually(() => errors.some((e) => e.includes('could not claim')), 3_000)
      const health = await mq.health()
      expect(health.status).toBe('DEGRADED')
      expect(health.reports.find((r) => r.name === 'consumers')).toMatchObject({
        status: 'DEGRADED',
        details: {
          failingStore: q,
          storeError: expect.stringMatching(/did not answer within 100 ms/),
        },
      })
      expect(calls).toBe(0)
      hang = false
      await eventually(() => calls === 1, 5_000, 'the handler once the store answers')
      await eventually(() => mq.inFlight === 0)
      expect((await mq.health()).status).toBe('UP')
    })
  })
}
