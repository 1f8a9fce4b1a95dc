import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AceMq, ConfigurationError, InMemoryTransport, toHealthJson } from '../../src/index.js'
import { httpStatusOf, worstStatus } from '../../src/spi.js'

describe('the health model', () => {
  it('aggregates to the worst status', () => {
    expect(worstStatus([])).toBe('UP')
    expect(worstStatus(['UP', 'DEGRADED', 'UP'])).toBe('DEGRADED')
    expect(worstStatus(['DEGRADED', 'DOWN'])).toBe('DOWN')
  })

  it('answers 503 only for DOWN', () => {
    expect(httpStatusOf('UP')).toBe(200)
    expect(httpStatusOf('DEGRADED')).toBe(200)
    expect(httpStatusOf('DOWN')).toBe(503)
  })
})

describe('mq.health()', () => {
  let transport: InMemoryTransport
  let mq: AceMq

  beforeEach(async () => {
    transport = new InMemoryTransport()
    mq = await AceMq.connect(transport)
  })

  afterEach(async () => {
    await mq.close({ drainTimeout: 0 })
  })

  it('reports an open connection UP with string details', async () => {
    const health = await mq.health()
    expect(health.status).toBe('UP')
    expect(health.reports).toEqual([
      {
        name: 'connection',
        status: 'UP',
        details: {
          open: 'true',
          blocked: 'false',
          transport: 'in-memory this process',
          inFlight: '0',
          held: '0',
        },
      },
    ])
    expect(toHealthJson(health)).toEqual({
      status: 'UP',
      inFlight: 0,
      components: {
        connection: {
          status: 'UP',
          open: 'true',
          blocked: 'false',
          transport: 'in-memory this process',
          inFlight: '0',
          held: '0',
        },
      },
    })
  })

  it('reports a blocked connection UP with the broker’s reason, and forgets the reason on unblock', async () => {
    transport.block('low on memory')
    const blocked = await mq.health()
    expect(blocked.status).toBe('UP')
    expect(blocked.reports[0]?.details).toMatchObject({
      blocked: 'true',
      blockedReason: 'low on memory',
    })
    transport.unblock()
    const clear = await mq.health()
    expect(clear.reports[0]?.details).toMatchObject({ blocked: 'false' })
    expect(clear.reports[0]?.details).not.toHaveProperty('blockedReason')
  })

  it('shows paused consuming and publishing only while paused', async () => {
    mq.pauseConsuming()
    mq.pausePublishing()
    expect((await mq.health()).reports[0]?.details).toMatchObject({
      consuming: 'paused',
      publishing: 'paused',
    })
    mq.resumeConsuming()
    mq.resumePublishing()
    const details = (await mq.health()).reports[0]?.details
    expect(details).not.toHaveProperty('consuming')
    expect(details).not.toHaveProperty('publishing')
  })

  it('aggregates contributors: DEGRADED stays DEGRADED, a throwing one is DOWN with its error', async () => {
    const remove = mq.registerHealth({
      name: 'partitions',
      report: () => ({ name: 'partitions', status: 'DEGRADED', details: { halted: '1' } }),
    })
    expect((await mq.health()).status).toBe('DEGRADED')
    mq.registerHealth({
      name: 'billing',
      report: async () => {
        throw new Error('billing API timed out')
      },
    })
    const health = await mq.health()
    expect(health.status).toBe('DOWN')
    expect(health.reports.find((r) => r.name === 'billing')).toEqual({
      name: 'billing',
      status: 'DOWN',
      details: { error: 'billing API timed out' },
    })
    remove()
    expect((await mq.health()).reports.map((r) => r.name)).toEqual(['connection', 'billing'])
  })

  it('refuses a contributor without a name, or with a name already taken', () => {
    expect(() =>
      mq.registerHealth({ name: '', report: () => ({ name: '', status: 'UP', details: {} }) }),
    ).toThrow(ConfigurationError)
    expect(() =>
      mq.registerHealth({
        name: 'connection',
        report: () => ({ name: 'c', status: 'UP', details: {} }),
      }),
    ).toThrow(/taken/)
  })

  it('reports a closed connection DOWN', async () => {
    await mq.close()
    const health = await mq.health()
    expect(health.status).toBe('DOWN')
    expect(health.reports[0]).toMatchObject({
      name: 'connection',
      status: 'DOWN',
      details: { open: 'false' },
    })
  })
})
