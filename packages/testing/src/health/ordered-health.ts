import { AceMq, InMemoryTransport } from '@acemq/core'
import { describe, expect, it } from 'vitest'
import { eventually } from '../helpers/eventually.js'
import { getJson, type HealthEndpointFixture } from './health-endpoint-contract.js'

/**
 * What an HTTP health adapter answers for an ordered queue: a halted partition is DEGRADED, so
 * the endpoint answers 200 (never 503: restarting the process would not fix the message), with
 * the `ordered:{name}` details; once resumed, UP again.
 */
export function orderedHealthContract(name: string, fixture: HealthEndpointFixture): void {
  describe(`${name} with an ordered queue`, () => {
    it('answers 200 DEGRADED with the halted partitions while one is halted, and UP once resumed', async () => {
      await using mq = await AceMq.connect(new InMemoryTransport())
      const ledger = await mq
        .ordered<{ account: string; poison?: boolean }>('ledger')
        .partitions(4)
        .keyedBy((entry) => entry.account)
        .onFailure('stop', { attempts: 1 })
        .declare()
      let fixed = false
      await ledger.consume((message) => {
        if (message.payload.poison === true && !fixed) throw new Error('bad entry')
      })
      await ledger.send({ account: 'acct-7' })
      await ledger.send({ account: 'acct-7', poison: true })
      await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt')
      const server = await fixture.serve(mq)
      /** The endpoint answers 200 with `status`, and the ledger's details as given. */
      async function answers(status: string, handled: string, more: object = {}): Promise<void> {
        const health = await getJson(`${server.url}/acemq-health`)
        expect(health.status).toBe(200)
        expect(health.body.status).toBe(status)
        expect(health.body.components['ordered:ledger']).toEqual({
          status,
          partitions: '4',
          handled,
          failed: '1',
          skipped: '0',
          ...more,
        })
      }
      try {
        await answers('DEGRADED', '1', { halted: String(ledger.partitionOf('acct-7')) })
        fixed = true
        ledger.resume(ledger.partitionOf('acct-7'))
        await eventually(() => ledger.handled === 2, 5_000, 'the resumed entry')
        await answers('UP', '2')
      } finally {
        await server.close()
      }
    })
  })
}
