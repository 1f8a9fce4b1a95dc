import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq, type HealthReport } from '@acemq/core'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import { TcpFaultProxy } from '../../../test-support/tcp-fault-proxy.js'
import { eventually, type Entry, requireRabbit, uniqueName } from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'

const hasRabbit = await requireRabbit()

function orderedReport(reports: readonly HealthReport[], name: string): HealthReport | undefined {
  return reports.find((report) => report.name === `ordered:${name}`)
}

// Only the first process's connection goes through the proxy: cutting it disturbs no one else.
describe.runIf(hasRabbit)('a halted ordered partition whose process loses the broker', () => {
  let vhost: BrokerVhost
  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-ordered-handover')
  })
  afterAll(async () => {
    await vhost?.delete()
  })

  it('is no longer reported halted by that process once the next consumer has taken it over and finished it in order', async () => {
    const name = uniqueName('ledger')
    const proxy = await TcpFaultProxy.start('127.0.0.1', Number(new URL(vhost.url).port || 5672))
    const declare = (mq: AceMq) =>
      mq
        .ordered<Entry>(name)
        .partitions(1)
        .keyedBy((entry) => entry.account)
        .onFailure('stop', { attempts: 2, delay: 10 })
        .declare()
    const a = await AceMq.connect(
      new AmqpTransport(proxy.urlFor(vhost.url), {
        connectionName: 'acemq-ordered-a',
        recovery: { initialDelay: 100, maxDelay: 500 },
      }),
    )
    const b = await AceMq.connect(
      new AmqpTransport(vhost.url, { connectionName: 'acemq-ordered-b' }),
    )
    try {
      const ledgerA = await declare(a)
      const ledgerB = await declare(b)
      let poisonRunsOnA = 0
      await ledgerA.consume((message) => {
        if (message.payload.seq === 5) {
          poisonRunsOnA++
          throw new Error('amount is not a number')
        }
      })
      // Second to subscribe: the waiting single active consumer.
      const seenByB: number[] = []
      await ledgerB.consume((message) => {
        seenByB.push(message.payload.seq)
      })
      for (let seq = 1; seq <= 20; seq++) await ledgerB.send({ account: 'acct-1', seq })
      await eventually(() => ledgerA.haltedPartitions.length === 1, 10_000, 'A halted on 5')
      expect(poisonRunsOnA).toBe(2)
      expect(orderedReport((await a.health()).reports, name)?.status).toBe('DEGRADED')

      await proxy.close()

      await eventually(() => seenByB.length === 16, 15_000, 'B finishing 5 to 20')
      expect(seenByB).toEqual(Array.from({ length: 16 }, (_, i) => i + 5))
      expect(ledgerA.haltedPartitions).toEqual([])
      const report = orderedReport((await a.health()).reports, name)
      expect(report?.status).toBe('UP')
      expect(report?.details?.['halted']).toBeUndefined()
    } finally {
      await a.close({ drainTimeout: 0 })
      await b.close({ drainTimeout: 0 })
      await proxy.close().catch(() => undefined)
    }
  }, 60_000)
})
