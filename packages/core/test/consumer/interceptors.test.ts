import { afterEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConfigurationError,
  ConsumerOptions,
  InMemoryTransport,
  Topology,
} from '../../src/index.js'
import { type InterceptorFailureInfo } from '../../src/spi.js'

// What the shared interceptor scenarios (@acemq/testing) do not cover: bad input, telemetry of a
// failed interceptor, and a beforePublish that throws or writes a reserved header.

let mq: AceMq | undefined

afterEach(async () => {
  await mq?.close({ drainTimeout: 0 })
  mq = undefined
})

async function connect(): Promise<AceMq> {
  mq = await AceMq.connect(new InMemoryTransport(), { onError: () => undefined })
  return mq
}

describe('interceptors', () => {
  it('refuses an interceptor that is not an object, has a bad order, or has no member', async () => {
    const connection = await connect()
    expect(() => connection.intercept(null as never)).toThrow(
      new ConfigurationError('intercept(interceptor) must be an interceptor object; got null'),
    )
    expect(() => connection.intercept({ order: Number.NaN, onError: () => undefined })).toThrow(
      'intercept(interceptor).order must be a finite number; got NaN',
    )
    expect(() => connection.intercept({ beforeHandle: 'yes' } as never)).toThrow(
      'intercept(interceptor).beforeHandle must be a function; got yes',
    )
    expect(() => connection.intercept({ name: 'empty' })).toThrow(
      /^intercept\(interceptor\) has none of beforeHandle, afterHandle, onError, beforePublish/,
    )
    expect(() => ConsumerOptions.defaults().withInterceptors({ order: 1 })).toThrow(
      /^withInterceptors\(interceptors\[0\]\) has none of/,
    )
  })

  it('counts an afterHandle that throws through the instrumentation, by interceptor and phase', async () => {
    const connection = await connect()
    const failures: InterceptorFailureInfo[] = []
    connection.setInstrumentation({
      publishStarted: () => undefined,
      processStarted: () => undefined,
      interceptorFailed: (info) => void failures.push(info),
    })
    const q = `intercept-telemetry-${Date.now()}`
    await connection.applyTopology(Topology.define().queueWithDeadLetter(q))
    let handled = 0
    const options = ConsumerOptions.defaults().withInterceptors({
      name: 'audit',
      afterHandle: () => {
        throw new Error('the audit log is full')
      },
    })
    await connection.consume(q, options, () => void handled++)
    await connection.publisher('', q).send({ n: 1 })
    await expect.poll(() => failures.length).toBe(1)
    expect(handled).toBe(1)
    expect(failures).toEqual([{ interceptor: 'audit', phase: 'afterHandle', queue: q }])
  })

  it('rejects a send whose beforePublish throws or writes an x-acemq-* header, and publishes nothing', async () => {
    const connection = await connect()
    const q = `intercept-publish-${Date.now()}`
    await connection.applyTopology(Topology.define().queueWithDeadLetter(q))
    let throwing = true
    connection.intercept({
      name: 'stamper',
      beforePublish: (p) => {
        if (throwing) throw new Error('no stamp today')
        return { headers: { ...p.headers, 'x-acemq-id': 'forged' } }
      },
    })
    const publisher = connection.publisher('', q)
    await expect(publisher.send({ n: 1 })).rejects.toThrow('no stamp today')
    throwing = false
    await expect(publisher.send({ n: 2 })).rejects.toThrow(/^stamper's beforePublish headers: /)
    await expect(publisher.sendAll([{ n: 3 }])).rejects.toThrow('1 of 1 were not confirmed')
    const received: unknown[] = []
    await connection.consume(q, ConsumerOptions.defaults(), (m) => void received.push(m.payload))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(received).toEqual([])
  })
})
