import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, Topology } from '@acemq/core'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { startRabbitNode, type RabbitNode } from '../../../test-support/rabbitmq-node.js'
import { RecordingTransport, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, closeConnectionNamed, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function eventually(
  condition: () => boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await sleep(10)
  }
}

function counter(): { runs: Map<string, number>; count(id: string): number } {
  const runs = new Map<string, number>()
  return {
    runs,
    count(id) {
      const n = (runs.get(id) ?? 0) + 1
      runs.set(id, n)
      return n
    },
  }
}

describe.runIf(hasRabbit)(
  'the engine when RabbitMQ closes one of its connections or channels',
  () => {
    let mq: AceMq | undefined
    afterEach(async () => {
      await mq?.close({ drainTimeout: 0 })
      mq = undefined
    })

    describe('on the main broker', () => {
      let vhost: BrokerVhost | undefined
      let releaseLock: (() => Promise<void>) | undefined
      beforeAll(async () => {
        releaseLock = await holdBrokerFaultLock()
        vhost = await BrokerVhost.create('acemq-engine-drop')
      }, LOCK_WAIT_TIMEOUT)
      afterAll(async () => {
        await vhost?.delete()
        await releaseLock?.()
      })

      it('handles held deliveries of the live consume channel once when only the publishing connection drops', async () => {
        const v = vhost as BrokerVhost
        const transport = new RecordingTransport(
          new AmqpTransport(v.url, {
            connectionName: 'acemq-engine-drop',
            recovery: { initialDelay: 100, maxDelay: 500 },
          }),
        )
        mq = await AceMq.connect(transport)
        const q = uniqueName('publish-drop')
        await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
        const { runs, count } = counter()
        await mq.consume(q, ConsumerOptions.defaults(), (message) => {
          count(message.envelope.id)
        })
        mq.pauseConsuming()
        for (const id of ['a', 'b', 'c']) await mq.publisher('', q).send({}, { id })
        await eventually(() => mq?.held === 3, 5_000, 'three held deliveries')
        await closeConnectionNamed(v.name, 'acemq-engine-drop (publish)')
        await eventually(() => mq?.transport.state.open === false, 5_000, 'the drop seen')
        await eventually(() => mq?.transport.state.open === true, 10_000, 'the recovery')
        mq.resumeConsuming()
        await eventually(() => runs.size === 3, 5_000, 'every held message handled')
        await eventually(() => mq?.inFlight === 0, 5_000, 'settled')
        expect(Object.fromEntries(runs)).toEqual({ a: 1, b: 1, c: 1 })
        for (const id of ['a', 'b', 'c']) {
          expect(transport.settlementsOf(id)).toEqual([
            expect.objectContaining({ kind: 'ack', written: true }),
          ])
        }
        expect(await v.counts(q)).toEqual({ ready: 0, unacked: 0 })
      }, 30_000)
    })

    /**
     * A node of its own with a 2 s `consumer_timeout`, checked every 500 ms (the main broker
     * keeps its 30 minutes): the channel closes about 2.5 s after a delivery is held.
     */
    describe('on a node whose consumer_timeout is 2 s', () => {
      let node: RabbitNode | undefined
      beforeAll(async () => {
        node = await startRabbitNode({
          prefix: 'acemq-engine-timeout',
          config: { consumer_timeout: '2000' },
          rabbitAdvanced: { channel_tick_interval: '500' },
        })
      }, 90_000)
      afterAll(async () => {
        await node?.stop()
      })

      async function connect(errors: string[]): Promise<{ mq: AceMq; q: string }> {
        const url = (node as RabbitNode).url
        mq = await AceMq.connect(
          new AmqpTransport(url, {
            connectionName: 'acemq-engine-timeout',
            recovery: { initialDelay: 100, maxDelay: 500 },
          }),
          { onError: (_error, context) => errors.push(context) },
        )
        const q = uniqueName('timeout')
        await mq.applyTopology(Topology.define().queueWithDeadLetter(q))
        return { mq, q }
      }

      it('never runs a delivery buffered from the channel the broker timed out: each message runs once after its redelivery', async () => {
        const errors: string[] = []
        const { mq, q } = await connect(errors)
        const { runs, count } = counter()
        await mq.consume(q, ConsumerOptions.defaults().withPrefetch(5), async (message) => {
          // The first run of m0 outlives the consumer timeout; the channel closes under it.
          if (count(message.envelope.id) === 1 && message.envelope.id === 'm0') await sleep(4_000)
        })
        for (let i = 0; i < 5; i++) await mq.publisher('', q).send({}, { id: `m${i}` })
        await eventually(() => runs.size === 5, 20_000, 'every message handled')
        await eventually(() => mq.inFlight === 0, 10_000, 'settled')
        await sleep(500)
        expect(Object.fromEntries(runs)).toEqual({ m0: 2, m1: 1, m2: 1, m3: 1, m4: 1 })
        expect(errors.some((e) => e.includes('lost its channel'))).toBe(true)
      }, 40_000)

      it('pauses longer than the consumer timeout without losing the channel: held deliveries go back and come again on resume', async () => {
        const errors: string[] = []
        const { mq, q } = await connect(errors)
        const { runs, count } = counter()
        await mq.consume(q, ConsumerOptions.defaults().withHeldTimeout('1s'), (message) => {
          count(message.envelope.id)
        })
        mq.pauseConsuming()
        for (const id of ['x', 'y', 'z']) await mq.publisher('', q).send({}, { id })
        await eventually(() => mq.held === 3, 5_000, 'three held deliveries')
        // Four times the broker's timeout.
        await sleep(8_000)
        expect(mq.held).toBe(0)
        expect(errors).toEqual([])
        mq.resumeConsuming()
        await eventually(() => runs.size === 3, 10_000, 'every message handled after the resume')
        expect(Object.fromEntries(runs)).toEqual({ x: 1, y: 1, z: 1 })
        expect(errors).toEqual([])
      }, 40_000)
    })
  },
)
