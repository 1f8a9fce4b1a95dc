import { afterEach, describe, expect, it } from 'vitest'
import { AceMq, InMemoryTransport, type HealthReport } from '../../src/index.js'
import { OrderLog, eventually, type Entry } from '@acemq/testing'

function orderedReport(reports: readonly HealthReport[], name: string): HealthReport | undefined {
  return reports.find((report) => report.name === `ordered:${name}`)
}

// docs/design.md §17: a halt belongs to the channel that holds the message.
describe('an ordered partition whose channel is lost while it is halted', () => {
  const closing: AceMq[] = []
  afterEach(async () => {
    for (const mq of closing.splice(0)) await mq.close({ drainTimeout: 0 })
  })

  async function halted(): Promise<{
    transport: InMemoryTransport
    mq: AceMq
    ledger: Awaited<ReturnType<typeof declare>>
    log: OrderLog
    runs: () => number
  }> {
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    closing.push(mq)
    const ledger = await declare(mq)
    const log = new OrderLog()
    let poisonRuns = 0
    await ledger.consume((message) => {
      if (message.payload.poison === true) {
        poisonRuns++
        throw new Error('amount is not a number')
      }
      log.record(message.payload)
    })
    for (let seq = 1; seq <= 20; seq++) {
      await ledger.send({ account: 'acct-1', seq, ...(seq === 5 ? { poison: true } : {}) })
    }
    await eventually(() => ledger.haltedPartitions.length === 1, 5_000, 'the halt on entry 5')
    expect(log.lastOf('acct-1')).toBe(4)
    return { transport, mq, ledger, log, runs: () => poisonRuns }
  }

  function declare(mq: AceMq) {
    return mq
      .ordered<Entry>('halt-lost')
      .partitions(1)
      .keyedBy((entry) => entry.account)
      .onFailure('stop', { attempts: 2, delay: 5 })
      .declare()
  }

  it('stops reporting the halt once another consumer has taken the partition over and finished it', async () => {
    const { transport, mq, ledger } = await halted()
    const queue = ledger.queueFor(0)
    transport.closeChannel(queue, 'consumer channel lost')
    // The next active consumer takes entry 5 and everything behind it before this one's channel
    // is back, as RabbitMQ's single active consumer hands the partition over.
    const taken: number[] = []
    for (;;) {
      const delivery = await transport.getOne(queue)
      if (delivery === undefined) break
      taken.push((JSON.parse(Buffer.from(delivery.body).toString()) as Entry).seq)
      delivery.ack()
    }
    expect(taken).toEqual(Array.from({ length: 16 }, (_, i) => i + 5))

    await eventually(() => ledger.haltedPartitions.length === 0, 2_000, 'the halt let go')
    const report = orderedReport((await mq.health()).reports, ledger.name)
    expect(report?.status).toBe('UP')
    expect(report?.details?.['halted']).toBeUndefined()
  })

  it('halts again without running the entry a third time when it comes back on the new channel', async () => {
    const { transport, mq, ledger, log, runs } = await halted()
    transport.closeChannel(ledger.queueFor(0), 'consumer channel lost')
    await eventually(() => transport.unackedCount(ledger.queueFor(0)) === 1, 2_000, 'held again')
    expect(ledger.haltedPartitions).toEqual([0])
    expect(orderedReport((await mq.health()).reports, ledger.name)?.status).toBe('DEGRADED')
    expect(runs()).toBe(2)
    expect(log.lastOf('acct-1')).toBe(4)
  })
})
