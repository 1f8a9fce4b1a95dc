import { describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  RetryPolicy,
  Topology,
  type IdempotencyStore,
} from '@acemq/core'
import { type ClaimingIdempotencyStore } from '@acemq/core/spi'
import { type BrokerProbe, type ScenarioTarget } from './engine-scenarios.js'
import { eachScenario } from './scenario-hooks.js'
import { eventually, sleep } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'

/** A store that implements only the four basic methods, as a contributed store might. */
export class BasicOnlyStore implements IdempotencyStore {
  constructor(readonly inner: ClaimingIdempotencyStore) {}
  claim(id: string): Promise<boolean> {
    return this.inner.claim(id)
  }
  confirm(id: string): Promise<void> {
    return this.inner.confirm(id)
  }
  release(id: string): Promise<void> {
    return this.inner.release(id)
  }
  isConfirmed(id: string): Promise<boolean> {
    return this.inner.isConfirmed(id)
  }
}

/** A store whose release always fails, as one that lost its database would. */
export class FailingReleaseStore implements ClaimingIdempotencyStore {
  releases = 0
  constructor(readonly inner: ClaimingIdempotencyStore) {}
  tryClaim(id: string): ReturnType<ClaimingIdempotencyStore['tryClaim']> {
    return this.inner.tryClaim(id)
  }
  claim(id: string): Promise<boolean> {
    return this.inner.claim(id)
  }
  confirm(id: string): Promise<void> {
    return this.inner.confirm(id)
  }
  async release(): Promise<void> {
    this.releases++
    throw new Error('the database is unreachable')
  }
  isConfirmed(id: string): Promise<boolean> {
    return this.inner.isConfirmed(id)
  }
}

/**
 * The idempotency step of docs/design.md §7 on every transport: claimed, duplicate and in progress,
 * and the failures around them.
 */
export function idempotencyScenarios(name: string, target: ScenarioTarget): void {
  describe(`idempotent consumers on ${name}`, () => {
    let mq: AceMq
    let probe: BrokerProbe & { close(): Promise<void> }
    const queues: string[] = []
    eachScenario(target, queues, (connection) => {
      ;({ mq, probe } = connection)
    })

    async function queue(): Promise<string> {
      const q = uniqueName('idem')
      queues.push(q)
      await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
      return q
    }

    it('handles the same message published twice once', async () => {
      const q = await queue()
      const store = new InMemoryIdempotencyStore()
      const handled: string[] = []
      await mq.consume<{ n: number }>(q, ConsumerOptions.defaults().idempotent(store), (m) => {
        handled.push(`${m.envelope.id}:${m.payload.n}`)
      })
      const publisher = mq.publisher('', q)
      await publisher.send({ n: 1 }, { id: 'order-1' })
      await publisher.send({ n: 2 }, { id: 'order-1' })
      await publisher.send({ n: 3 }, { id: 'order-2' })
      await eventually(
        async () => handled.length === 2 && (await probe.count(q)) === 0 && mq.inFlight === 0,
      )
      await sleep(100)
      expect(handled).toEqual(['order-1:1', 'order-2:3'])
    })

    it('gets the same answers from a store with only the four basic methods', async () => {
      const q = await queue()
      const store = new BasicOnlyStore(new InMemoryIdempotencyStore())
      let calls = 0
      await mq.consume(q, ConsumerOptions.defaults().idempotent(store), () => {
        calls++
      })
      const publisher = mq.publisher('', q)
      await publisher.send({}, { id: 'basic-1' })
      await publisher.send({}, { id: 'basic-1' })
      await eventually(async () => (await probe.count(q)) === 0 && mq.inFlight === 0)
      await sleep(100)
      expect(calls).toBe(1)
    })

    it('puts an in-progress message back with its attempt unchanged, never dead-letters it, and handles it once the claim is released', async () => {
      const q = await queue()
      const store = new InMemoryIdempotencyStore()
      expect(await store.tryClaim('busy-1')).toBe('claimed')
      const attempts: number[] = []
      await mq.consume(
        q,
        ConsumerOptions.defaults()
          .idempotent(store)
          .withRetry(RetryPolicy.fixed(2, 10))
          .withInProgressDelay(30),
        (m) => {
          attempts.push(m.envelope.attempt)
        },
      )
      await mq.publisher('', q).send({}, { id: 'busy-1' })
      await sleep(300)
      expect(attempts).toEqual([])
      expect(await probe.count(`${q}.dlq`)).toBe(0)
      await store.release('busy-1')
      await eventually(() => attempts.length === 1)
      expect(attempts).toEqual([1])
    })

    it('acks an in-progress message as a duplicate once its claim is confirmed elsewhere', async () => {
      const q = await queue()
      const store = new InMemoryIdempotencyStore()
      expect(await store.tryClaim('busy-2')).toBe('claimed')
      let calls = 0
      await mq.consume(
        q,
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay(30),
        () => {
          calls++
        },
      )
      await mq.publisher('', q).send({}, { id: 'busy-2' })
      await sleep(150)
      await store.confirm('busy-2')
      await eventually(
        async () => (await probe.count(q)) === 0 && mq.inFlight === 0,
        5_000,
        'the duplicate acked',
      )
      await sleep(100)
      expect(calls).toBe(0)
      expect(await probe.count(`${q}.dlq`)).toBe(0)
    })

    it('handles exactly once when the store’s release fails and the handler fails once', async () => {
      const q = await queue()
      const store = new FailingReleaseStore(new InMemoryIdempotencyStore({ claimTimeout: 300 }))
      let calls = 0
      let successes = 0
      await mq.consume(
        q,
        ConsumerOptions.defaults()
          .idempotent(store)
          .withRetry(RetryPolicy.fixed(3, 10))
          .withInProgressDelay(50),
        () => {
          calls++
          if (calls === 1) throw new Error('flaky once')
          successes++
        },
      )
      await mq.publisher('', q).send({}, { id: 'release-fails' })
      await eventually(() => successes === 1, 10_000, 'the retry to succeed after the lease')
      await eventually(async () => (await probe.count(q)) === 0 && mq.inFlight === 0)
      // The failed release is tried again three times (100 ms, 500 ms, 2 s), then left to lapse.
      await eventually(() => store.releases === 4, 10_000, 'the release tried four times')
      await sleep(400)
      expect(successes).toBe(1)
      expect(calls).toBe(2)
      expect(store.releases).toBe(4)
      expect(await probe.count(`${q}.dlq`)).toBe(0)
    })

    it('retries a confirm that fails once, so a second copy of the message is a duplicate', async () => {
      const q = await queue()
      const inner = new InMemoryIdempotencyStore({ claimTimeout: 200 })
      let confirmFailures = 1
      const store: ClaimingIdempotencyStore = {
        tryClaim: (id) => inner.tryClaim(id),
        claim: (id) => inner.claim(id),
        confirm: async (id) => {
          if (confirmFailures-- > 0) throw new Error('the database went away while confirming')
          return inner.confirm(id)
        },
        release: (id) => inner.release(id),
        isConfirmed: (id) => inner.isConfirmed(id),
      }
      let calls = 0
      await mq.consume(
        q,
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay(50).withPrefetch(1),
        () => {
          calls++
        },
      )
      const publisher = mq.publisher('', q)
      await publisher.send({}, { id: 'confirm-once' })
      await eventually(async () => (await probe.count(q)) === 0 && mq.inFlight === 0)
      await sleep(300)
      await publisher.send({}, { id: 'confirm-once' })
      await eventually(async () => (await probe.count(q)) === 0 && mq.inFlight === 0)
      await sleep(100)
      expect(calls).toBe(1)
      expect(await inner.isConfirmed('confirm-once')).toBe(true)
    })

    it('parks a message whose id no store can key on, instead of putting it back for ever', async () => {
      const q = await queue()
      let calls = 0
      await mq.consume(
        q,
        ConsumerOptions.defaults().idempotent(new InMemoryIdempotencyStore()),
        () => {
          calls++
        },
      )
      await probe.sendRaw(q, Buffer.from('{}'), {
        contentType: 'application/json',
        headers: { 'x-acemq-id': 'order\u00001' },
      })
      await probe.sendRaw(q, Buffer.from('{}'), {
        contentType: 'application/json',
        headers: { 'x-acemq-id': 'x'.repeat(300) },
      })
      await eventually(async () => (await probe.count(`${q}.parked`)) === 2, 5_000, 'both parked')
      const copy = await probe.get(`${q}.parked`)
      expect(String(copy?.headers['x-acemq-error'])).toMatch(/^invalid message id: /)
      expect(calls).toBe(0)
    })

    it('puts a message back, attempt unchanged, when the store cannot answer a claim', async () => {
      const q = await queue()
      let failures = 2
      const inner = new InMemoryIdempotencyStore()
      const flaky: ClaimingIdempotencyStore = {
        tryClaim: async (id) => {
          if (failures-- > 0) throw new Error('connection refused')
          return inner.tryClaim(id)
        },
        claim: (id) => inner.claim(id),
        confirm: (id) => inner.confirm(id),
        release: (id) => inner.release(id),
        isConfirmed: (id) => inner.isConfirmed(id),
      }
      const attempts: number[] = []
      await mq.consume(
        q,
        ConsumerOptions.defaults().idempotent(flaky).withInProgressDelay(20),
        (m) => {
          attempts.push(m.envelope.attempt)
        },
      )
      await mq.publisher('', q).send({}, { id: 'store-down' })
      await eventually(
        () => attempts.length === 1,
        5_000,
        'the message handled once the store is back',
      )
      expect(attempts).toEqual([1])
      expect(await probe.count(`${q}.dlq`)).toBe(0)
      await eventually(async () => (await probe.count(q)) === 0 && mq.inFlight === 0)
    })
  })
}
