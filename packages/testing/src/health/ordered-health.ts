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
      try {
        const halted = await getJson(`${server.url}/acemq-health`)
        expect(halted.status).toBe(200)
        expect(halted.body.status).toBe('DEGRADED')
        expect(halted.body.components['ordered:ledger']).toEqual({
          status: 'DEGRADED',
          partitions: '4',
          handled: '1',
          failed: '1',
          skipped: '0',
          halted: String(ledger.partitionOf('acct-7')),
        })
        fixed = true
        ledger.resume(ledger.partitionOf('acct-7'))
        await eventually(() => ledger.handled === 2, 5_000, 'the resumed entry')
        const resumed = await getJson(`${server.url}/acemq-health`)
        expect(resumed.status).toBe(200)
        expect(resumed.body.status).toBe('UP')
        expect(resumed.body.components['ordered:ledger']).toEqual({
          status: 'UP',
          partitions: '4',
          handled: '2',
          failed: '1',
          skipped: '0',
        })
      } finally {
        await server.close()
      }
    })
  })
}
