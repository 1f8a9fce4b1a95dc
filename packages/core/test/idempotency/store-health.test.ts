import { describe, expect, it } from 'vitest'
import { AceMqError, ErrorCodes } from '../../src/index.js'
import { storeHealthContributor } from '../../src/spi.js'

describe('storeHealthContributor', () => {
  it('is UP with the table while verify resolves', async () => {
    const contributor = storeHealthContributor('idempotency-store', 'seen', async () => undefined)
    expect(contributor.name).toBe('idempotency-store')
    expect(await contributor.report()).toStrictEqual({
      name: 'idempotency-store',
      status: 'UP',
      details: { table: 'seen' },
    })
  })

  it('is DEGRADED, never DOWN, with the error and its code while verify rejects', async () => {
    const contributor = storeHealthContributor('orders-store', 'seen', async () => {
      throw new AceMqError('the idempotency table seen does not exist', {
        code: ErrorCodes.STORE_TABLE_MISSING,
      })
    })
    expect(await contributor.report()).toStrictEqual({
      name: 'orders-store',
      status: 'DEGRADED',
      details: {
        table: 'seen',
        error: expect.stringContaining('the idempotency table seen does not exist'),
        code: 'ACEMQ_STORE_TABLE_MISSING',
      },
    })
  })

  it('leaves the code out for an error that has none', async () => {
    const contributor = storeHealthContributor('s', 't', () => Promise.reject(new Error('refused')))
    const report = await contributor.report()
    expect(report.status).toBe('DEGRADED')
    expect(report.details).toStrictEqual({ table: 't', error: expect.stringContaining('refused') })
  })
})
