import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  InMemoryTransport,
  Topology,
  type HealthContributor,
} from '@acemq/core'
import { type ClaimingIdempotencyStore } from '@acemq/core/spi'

/** A store that can say whether it is ready: its table exists and answers. */
export interface ReadinessStore extends ClaimingIdempotencyStore {
  verify(): Promise<void>
  healthContributor(options?: { readonly name?: string }): HealthContributor
}

/** A store on a table that does not exist yet, and the way to create it. */
export interface ReadinessFixture {
  readonly store: ReadinessStore
  createTable(): Promise<void>
  cleanup(): Promise<void>
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * What every idempotency store does when its table is missing: it says so (with
 * `ACEMQ_STORE_TABLE_MISSING` and the way to create it) from a claim and from `verify()`, its
 * health contributor is DEGRADED, and a consumer on it never runs a handler silently stuck —
 * the failure is printed and the connection's health says which queue and why.
 */
export function storeReadinessScenarios(
  name: string,
  target: { create(): Promise<ReadinessFixture> },
): void {
  describe(`${name}: a missing table`, () => {
    let fixture: ReadinessFixture

    beforeEach(async () => {
      fixture = await target.create()
    })

    afterEach(async () => {
      await fixture.cleanup()
    })

    it('a claim says the table is missing and how to create it', async () => {
      await expect(fixture.store.tryClaim('m-1')).rejects.toMatchObject({
        code: 'ACEMQ_STORE_TABLE_MISSING',
        message: expect.stringContaining('createTableSql()'),
      })
    })

    it('verify() rejects at start-up while the table is missing, and resolves once it exists', async () => {
      await expect(fixture.store.verify()).rejects.toMatchObject({
        code: 'ACEMQ_STORE_TABLE_MISSING',
      })
      await fixture.createTable()
      await expect(fixture.store.verify()).resolves.toBeUndefined()
      expect(await fixture.store.tryClaim('m-1')).toBe('claimed')
    })

    it('its health contributor is DEGRADED with the reason while the table is missing, UP once it exists', async () => {
      const contributor = fixture.store.healthContributor()
      expect(contributor.name).toBe('idempotency-store')
      const missing = await contributor.report()
      expect(missing).toMatchObject({ name: 'idempotency-store', status: 'DEGRADED' })
      expect(missing.details['error']).toMatch(/does not exist/)
      await fixture.createTable()
      expect(await contributor.report()).toMatchObject({
        name: 'idempotency-store',
        status: 'UP',
      })
      expect(fixture.store.healthContributor({ name: 'orders-store' }).name).toBe('orders-store')
    })

    it('a consumer on it is not stuck silently: the failure is printed and health is DEGRADED with the reason', async () => {
      const warnings: Error[] = []
      const onWarning = (warning: Error): void => void warnings.push(warning)
      process.on('warning', onWarning)
      const mq = await AceMq.connect(new InMemoryTransport())
      try {
        await mq.applyTopology(Topology.define().queue('orders'))
        let handled = 0
        await mq.consume(
          'orders',
          ConsumerOptions.defaults().idempotent(fixture.store).withInProgressDelay(50),
          () => {
            handled++
          },
        )
        await mq.publisher('', 'orders').send({ id: 'o-1' }, { id: 'o-1' })
        const deadline = Date.now() + 5_000
        while (!warnings.some((w) => w.name === 'AceMqWarning') && Date.now() < deadline) {
          await sleep(20)
        }
        const printed = warnings.filter((w) => w.name === 'AceMqWarning')
        expect(printed.map((w) => w.message)).toEqual([expect.stringMatching(/does not exist/)])
        expect(printed[0]).toMatchObject({ code: 'ACEMQ_STORE_TABLE_MISSING' })
        expect(handled).toBe(0)
        const health = await mq.health()
        expect(health.status).toBe('DEGRADED')
        const consumers = health.reports.find((r) => r.name === 'consumers')
        expect(consumers?.details).toMatchObject({ failingStore: 'orders' })
        expect(consumers?.details['storeError']).toMatch(/does not exist/)

        // Created while the consumer waits, the table is used at the next try.
        await fixture.createTable()
        while (handled === 0 && Date.now() < deadline + 5_000) await sleep(20)
        expect(handled).toBe(1)
        expect((await mq.health()).status).toBe('UP')
      } finally {
        await mq.close()
        process.off('warning', onWarning)
      }
    })
  })
}
