import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  aggregateHealth,
  HealthContributors,
  type ConnectionHealth,
  type ConsumerHealth,
} from '../../src/health/health-aggregation.js'
import { ConfigurationError } from '../../src/index.js'
import type { HealthContributor, HealthReport } from '../../src/index.js'

type State = ConnectionHealth['transport']['state']

function connection(
  state: Partial<State> = {},
  rest: Partial<Omit<ConnectionHealth, 'transport'>> = {},
): ConnectionHealth {
  return {
    transport: {
      kind: 'memory',
      description: 'in-process',
      state: { open: true, closed: false, blocked: false, ...state },
    },
    inFlight: 0,
    held: 0,
    consumingPaused: false,
    publishingPaused: false,
    closing: false,
    ...rest,
  }
}

type Trouble = NonNullable<ReturnType<ConsumerHealth['trouble']>>

function consumer(
  trouble?: Partial<Trouble>,
  counts: { waiting?: number; refused?: number } = {},
): ConsumerHealth {
  return {
    waiting: counts.waiting ?? 0,
    refused: counts.refused ?? 0,
    trouble: () =>
      trouble === undefined
        ? undefined
        : {
            queue: 'orders',
            unsubscribed: false,
            failingMoves: [],
            storeFailure: undefined,
            ...trouble,
          },
  }
}

function contributor(
  name: string,
  report: () => HealthReport | Promise<HealthReport>,
): HealthContributor {
  return { name, report }
}

async function reportsOf(
  conn: ConnectionHealth,
  consumers: readonly ConsumerHealth[] = [],
  contributors = new HealthContributors(),
) {
  return aggregateHealth(conn, consumers, contributors)
}

async function connectionReport(conn: ConnectionHealth) {
  return (await reportsOf(conn)).reports.find((r) => r.name === 'connection')
}

async function consumersReport(consumers: readonly ConsumerHealth[]) {
  return (await reportsOf(connection(), consumers)).reports.find((r) => r.name === 'consumers')
}

async function contributorReport(c: HealthContributor) {
  const contributors = new HealthContributors()
  contributors.register(c)
  const [report] = await contributors.reports()
  return report
}

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

describe('the connection report', () => {
  it('is UP with the transport, open and blocked flags and the counts', async () => {
    expect(await connectionReport(connection({}, { inFlight: 3, held: 2 }))).toEqual({
      name: 'connection',
      status: 'UP',
      details: {
        open: 'true',
        blocked: 'false',
        transport: 'memory in-process',
        inFlight: '3',
        held: '2',
      },
    })
  })

  it('stays UP while the broker blocks publishing, and says why', async () => {
    const report = await connectionReport(connection({ blocked: true, blockedReason: 'low disk' }))
    expect(report?.status).toBe('UP')
    expect(report?.details).toMatchObject({ blocked: 'true', blockedReason: 'low disk' })
  })

  it('gives no reason when the broker blocks without one', async () => {
    const report = await connectionReport(connection({ blocked: true }))
    expect(report?.details).not.toHaveProperty('blockedReason')
  })

  it('ignores a reason left over once the broker no longer blocks', async () => {
    const report = await connectionReport(connection({ blocked: false, blockedReason: 'old' }))
    expect(report?.details).not.toHaveProperty('blockedReason')
  })

  it('says when consuming and publishing are paused', async () => {
    const report = await connectionReport(
      connection({}, { consumingPaused: true, publishingPaused: true }),
    )
    expect(report?.details).toMatchObject({ consuming: 'paused', publishing: 'paused' })
  })

  it('is DEGRADED and recovering while the connection is not open', async () => {
    const report = await connectionReport(connection({ open: false }))
    expect(report?.status).toBe('DEGRADED')
    expect(report?.details['recovering']).toBe('true')
  })

  it('is DOWN once the transport is closed', async () => {
    const report = await connectionReport(connection({ open: false, closed: true }))
    expect(report?.status).toBe('DOWN')
    expect(report?.details).not.toHaveProperty('recovering')
  })

  it('is DOWN while the connection is closing, though the transport is still open', async () => {
    expect((await connectionReport(connection({}, { closing: true })))?.status).toBe('DOWN')
  })
})

describe('the consumers report', () => {
  it('is absent while there is no consumer', async () => {
    const result = await reportsOf(connection())
    expect(result.reports.map((r) => r.name)).toEqual(['connection'])
  })

  it('is UP with the count and the messages waiting, summed', async () => {
    expect(
      await consumersReport([
        consumer(undefined, { waiting: 2 }),
        consumer(undefined, { waiting: 3 }),
      ]),
    ).toEqual({ name: 'consumers', status: 'UP', details: { count: '2', waiting: '5' } })
  })

  it('counts refused messages without degrading', async () => {
    const report = await consumersReport([
      consumer(undefined, { refused: 1 }),
      consumer(undefined, { refused: 2 }),
    ])
    expect(report?.status).toBe('UP')
    expect(report?.details['refused']).toBe('3')
  })

  it('lists nothing for a consumer whose trouble is all clear', async () => {
    expect(await consumersReport([consumer({})])).toEqual({
      name: 'consumers',
      status: 'UP',
      details: { count: '1', waiting: '0' },
    })
  })

  it('is DEGRADED and names the queues that lost their subscription', async () => {
    const report = await consumersReport([
      consumer({ queue: 'orders', unsubscribed: true }),
      consumer({ queue: 'billing', unsubscribed: true }),
    ])
    expect(report?.status).toBe('DEGRADED')
    expect(report?.details['unsubscribed']).toBe('orders,billing')
  })

  it('is DEGRADED and names each move that fails, queue -> target', async () => {
    const report = await consumersReport([
      consumer({ queue: 'orders', failingMoves: ['orders.retry', 'orders.dlq'] }),
    ])
    expect(report?.status).toBe('DEGRADED')
    expect(report?.details['failingMoves']).toBe('orders -> orders.retry,orders -> orders.dlq')
    expect(report?.details).not.toHaveProperty('unsubscribed')
  })

  it('is DEGRADED and names the queues whose store fails, with the last error', async () => {
    const report = await consumersReport([
      consumer({ queue: 'orders', storeFailure: 'timeout' }),
      consumer({ queue: 'billing', storeFailure: 'refused' }),
    ])
    expect(report?.status).toBe('DEGRADED')
    expect(report?.details).toEqual({
      count: '2',
      waiting: '0',
      failingStore: 'orders,billing',
      storeError: 'refused',
    })
  })
})

describe('health contributors', () => {
  it('reports a contributor under its own name, details as strings', async () => {
    const report = await contributorReport(
      contributor('cache', () => ({
        name: 'other',
        status: 'DEGRADED',
        details: { size: 3 as unknown as string },
      })),
    )
    expect(report).toEqual({ name: 'cache', status: 'DEGRADED', details: { size: '3' } })
  })

  it('reports a contributor without details with empty details', async () => {
    const report = await contributorReport(
      contributor('cache', () => ({ status: 'UP' }) as unknown as HealthReport),
    )
    expect(report).toEqual({ name: 'cache', status: 'UP', details: {} })
  })

  it('passes on a DOWN report as it is', async () => {
    const report = await contributorReport(
      contributor('cache', () => ({ name: 'cache', status: 'DOWN', details: { why: 'gone' } })),
    )
    expect(report).toEqual({ name: 'cache', status: 'DOWN', details: { why: 'gone' } })
  })

  it('reports DOWN with the error when a contributor throws', async () => {
    const report = await contributorReport(
      contributor('cache', () => {
        throw new Error('cache unreachable')
      }),
    )
    expect(report).toEqual({
      name: 'cache',
      status: 'DOWN',
      details: { error: 'cache unreachable' },
    })
  })

  it('reports DOWN when a contributor rejects', async () => {
    const report = await contributorReport(
      contributor('cache', () => Promise.reject(new Error('no answer'))),
    )
    expect(report?.details).toEqual({ error: 'no answer' })
  })

  it('reports DOWN when a contributor returns an unknown status', async () => {
    const report = await contributorReport(
      contributor('cache', () => ({ status: 'FINE' }) as unknown as HealthReport),
    )
    expect(report).toEqual({
      name: 'cache',
      status: 'DOWN',
      details: { error: 'report() returned no valid status (UP, DEGRADED or DOWN): "FINE"' },
    })
  })

  it('reports DOWN when a contributor returns nothing', async () => {
    const report = await contributorReport(
      contributor('cache', () => undefined as unknown as HealthReport),
    )
    expect(report?.status).toBe('DOWN')
    expect(report?.details['error']).toContain('report() returned no valid status')
  })

  it('reports DOWN a contributor that takes longer than 5 s', async () => {
    vi.useFakeTimers()
    const pending = contributorReport(contributor('slow', () => new Promise<never>(() => {})))
    await vi.advanceTimersByTimeAsync(5_000)
    expect(await pending).toEqual({
      name: 'slow',
      status: 'DOWN',
      details: { error: 'no report within 5000 ms' },
    })
  })

  it('waits up to 5 s for a slow contributor', async () => {
    vi.useFakeTimers()
    const pending = contributorReport(
      contributor(
        'slow',
        () =>
          new Promise<HealthReport>((resolve) => {
            setTimeout(() => resolve({ name: 'slow', status: 'UP', details: {} }), 4_900)
          }),
      ),
    )
    await vi.advanceTimersByTimeAsync(5_000)
    expect((await pending)?.status).toBe('UP')
  })

  it('leaves no timer behind once a contributor has answered', async () => {
    vi.useFakeTimers()
    await contributorReport(
      contributor('cache', () => ({ name: 'cache', status: 'UP', details: {} })),
    )
    expect(vi.getTimerCount()).toBe(0)
  })

  it('works where timers have no unref(), as in a browser', async () => {
    vi.spyOn(globalThis, 'setTimeout').mockImplementation((() => 0) as unknown as typeof setTimeout)
    const report = await contributorReport(
      contributor('cache', () => ({ name: 'cache', status: 'UP', details: {} })),
    )
    expect(report?.status).toBe('UP')
  })

  it('reports every contributor after the connection and consumers', async () => {
    const contributors = new HealthContributors()
    contributors.register(contributor('a', () => ({ name: 'a', status: 'UP', details: {} })))
    contributors.register(contributor('b', () => ({ name: 'b', status: 'UP', details: {} })))
    const result = await reportsOf(connection(), [consumer()], contributors)
    expect(result.reports.map((r) => r.name)).toEqual(['connection', 'consumers', 'a', 'b'])
  })

  it('stops reporting a contributor once removed', async () => {
    const contributors = new HealthContributors()
    const remove = contributors.register(
      contributor('a', () => ({ name: 'a', status: 'UP', details: {} })),
    )
    remove()
    expect(await contributors.reports()).toEqual([])
  })

  it('keeps a contributor registered again under the name when the old one is removed twice', async () => {
    const contributors = new HealthContributors()
    const removeOld = contributors.register(
      contributor('a', () => ({ name: 'a', status: 'UP', details: {} })),
    )
    removeOld()
    contributors.register(contributor('a', () => ({ name: 'a', status: 'DEGRADED', details: {} })))
    removeOld()
    expect((await contributors.reports()).map((r) => r.status)).toEqual(['DEGRADED'])
  })
})

describe('registering a contributor', () => {
  const message = 'registerHealth(contributor) needs a non-empty name and a report() function'

  it.each([
    ['nothing', undefined],
    ['a name that is not a string', { name: 42, report: (): undefined => undefined }],
    ['an empty name', { name: '', report: (): undefined => undefined }],
    ['no report function', { name: 'cache', report: 'UP' }],
  ])('refuses %s', (_, value) => {
    const contributors = new HealthContributors()
    expect(() => contributors.register(value as unknown as HealthContributor)).toThrow(
      new ConfigurationError(message),
    )
  })

  it.each(['connection', 'consumers'])('refuses the reserved name %s', (name) => {
    const contributors = new HealthContributors()
    expect(() =>
      contributors.register(contributor(name, () => ({ name, status: 'UP', details: {} }))),
    ).toThrow(new ConfigurationError(`registerHealth(contributor): the name '${name}' is taken`))
  })

  it('refuses a name already registered', () => {
    const contributors = new HealthContributors()
    const c = contributor('cache', () => ({ name: 'cache', status: 'UP', details: {} }))
    contributors.register(c)
    expect(() => contributors.register({ ...c })).toThrow(
      "registerHealth(contributor): the name 'cache' is taken",
    )
  })
})

describe('the aggregate', () => {
  it('is UP with the connection in-flight count when all is well', async () => {
    const result = await reportsOf(connection({}, { inFlight: 4 }))
    expect(result.status).toBe('UP')
    expect(result.inFlight).toBe(4)
  })

  it('is DEGRADED when a consumer is', async () => {
    expect((await reportsOf(connection(), [consumer({ unsubscribed: true })])).status).toBe(
      'DEGRADED',
    )
  })

  it('is DOWN when a contributor is, even with a degraded connection', async () => {
    const contributors = new HealthContributors()
    contributors.register(contributor('db', () => ({ name: 'db', status: 'DOWN', details: {} })))
    expect((await reportsOf(connection({ open: false }), [], contributors)).status).toBe('DOWN')
  })
})
