import { describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  InMemoryTransport,
  PublishingPausedError,
  RetryPolicy,
  Topology,
  type Instrumentation,
} from '../../src/index.js'
import { type ProcessScope } from '../../src/spi.js'

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

function boom(): never {
  throw new Error('telemetry exploded')
}

describe('an instrumentation that throws', () => {
  it('never fails a message, an ack or a publish; every failure goes to onError', async () => {
    const errors: string[] = []
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport, { onError: (_e, context) => errors.push(context) })
    await mq.applyTopology(Topology.define().queueWithDeadLetter('q'))
    const scope: ProcessScope = {
      run: boom,
      handled: boom,
      retried: boom,
      setAside: boom,
      end: boom,
    }
    mq.setInstrumentation({ publishStarted: () => ({ end: boom }), processStarted: () => scope })
    const attempts: number[] = []
    await mq.consume('q', ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(2, 5)), (m) => {
      attempts.push(m.envelope.attempt)
      if (m.envelope.attempt === 1) throw new Error('once')
    })
    await mq.publisher('', 'q').send({})
    while (attempts.length < 2 || mq.inFlight > 0) await sleep(5)
    expect(attempts).toEqual([1, 2])
    expect(transport.messageCount('q')).toBe(0)
    expect(transport.messageCount('q.dlq')).toBe(0)
    expect(errors).toContain('instrumentation: entering a process scope failed')
    expect(errors).toContain('instrumentation: end failed')
    expect(errors).toContain('instrumentation: ending a publish scope failed')
    await mq.close()
  })

  it('is replaced and returned by setInstrumentation', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    const first: Instrumentation = {
      publishStarted: () => undefined,
      processStarted: () => undefined,
    }
    expect(mq.setInstrumentation(first)).toBeUndefined()
    expect(mq.instrumentation).toBe(first)
    expect(mq.setInstrumentation(undefined)).toBe(first)
    expect(mq.instrumentation).toBeUndefined()
    await mq.close()
  })

  it('counts each message of a paused batch as refused', async () => {
    const mq = await AceMq.connect(new InMemoryTransport())
    await mq.applyTopology(Topology.define().queue('q'))
    const outcomes: string[] = []
    mq.setInstrumentation({
      publishStarted: () => ({ end: (outcome) => outcomes.push(outcome) }),
      processStarted: () => undefined,
    })
    mq.pausePublishing()
    await expect(mq.publisher('', 'q').sendAll([1, 2, 3])).rejects.toBeInstanceOf(
      PublishingPausedError,
    )
    expect(outcomes).toEqual(['refused', 'refused', 'refused'])
    await mq.close()
  })
})
