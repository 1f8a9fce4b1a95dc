import { afterEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  FatalError,
  InMemoryTransport,
  Topology,
  type DeadLetterReport,
} from '../../src/index.js'

// Loud dead letters beyond the shared scenarios (@acemq/testing): a flood, a consumer's own
// hook, a hook that throws, and bad input.

let mq: AceMq | undefined

afterEach(async () => {
  await mq?.close({ drainTimeout: 0 })
  mq = undefined
})

async function queueOn(connection: AceMq): Promise<string> {
  const q = `dead-letter-reports-${Math.random().toString(36).slice(2)}`
  await connection.applyTopology(Topology.define().queueWithDeadLetter(q))
  return q
}

describe('dead-letter reports', () => {
  it('prints one line for a flood of messages dead-lettered for the same reason, not one per message', async () => {
    const printed: string[] = []
    const listener = (warning: Error & { code?: string }): void => {
      if (warning.code === 'ACEMQ_DEAD_LETTERED') printed.push(warning.message)
    }
    process.on('warning', listener)
    try {
      mq = await AceMq.connect(new InMemoryTransport())
      const q = await queueOn(mq)
      let handled = 0
      await mq.consume(q, ConsumerOptions.defaults().withConcurrency(10), () => {
        handled++
        throw new FatalError('the customer is gone')
      })
      await mq.publisher('', q).sendAll(Array.from({ length: 50 }, (_, i) => i))
      await expect.poll(() => handled, { timeout: 5_000 }).toBe(50)
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(printed).toHaveLength(1)
      expect(printed[0]).toMatch(
        new RegExp(
          `^message \\S+ from '${q}' was moved to '${q}\\.dlq' \\(rejected\\): the customer is gone$`,
        ),
      )
    } finally {
      process.off('warning', listener)
    }
  })

  it("uses a consumer's own onDeadLetter instead of the connection's", async () => {
    const connectionReports: DeadLetterReport[] = []
    const consumerReports: DeadLetterReport[] = []
    mq = await AceMq.connect(new InMemoryTransport(), {
      onDeadLetter: (r) => connectionReports.push(r),
    })
    const q = await queueOn(mq)
    const options = ConsumerOptions.defaults().withOnDeadLetter((r) => consumerReports.push(r))
    await mq.consume(q, options, () => {
      throw new FatalError('no')
    })
    await mq.publisher('', q).send({}, { id: 'own-hook' })
    await expect.poll(() => consumerReports.length).toBe(1)
    expect(consumerReports[0]).toMatchObject({ messageId: 'own-hook', outcome: 'rejected' })
    expect(connectionReports).toEqual([])
  })

  it('reports an onDeadLetter that throws to onError, and the message still lands once', async () => {
    const errors: string[] = []
    mq = await AceMq.connect(new InMemoryTransport(), {
      onError: (_error, context) => errors.push(context),
      onDeadLetter: () => {
        throw new Error('the pager is down')
      },
    })
    const q = await queueOn(mq)
    await mq.consume(q, ConsumerOptions.defaults(), () => {
      throw new FatalError('no')
    })
    await mq.publisher('', q).send({}, { id: 'hook-throws' })
    await expect.poll(() => errors).toEqual(['onDeadLetter failed for message hook-throws'])
    expect(await mq.transport.queueLength?.(`${q}.dlq`)).toBe(1)
  })

  it('refuses an onDeadLetter that is not a function, naming the argument', async () => {
    await expect(
      AceMq.connect(new InMemoryTransport(), { onDeadLetter: 'log' as never }),
    ).rejects.toThrow('AceMq.connect(options.onDeadLetter) must be a function; got log')
    expect(() => ConsumerOptions.defaults().withOnDeadLetter(42 as never)).toThrow(
      'withOnDeadLetter(onDeadLetter) must be a function; got 42',
    )
  })
})
