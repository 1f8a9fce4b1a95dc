import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AceMq, InMemoryTransport } from '@acemq/core'
import { eventually } from '@acemq/testing'
import { ACEMQ_METRICS, instrument } from '../src/index.js'
import { OtelHarness, useOtelGlobals } from './otel-harness.js'

interface Entry {
  readonly account: string
  readonly poison?: boolean
}

describe('@acemq/otel on an ordered queue', () => {
  useOtelGlobals()
  let otel: OtelHarness
  let mq: AceMq
  let uninstall: () => void

  beforeEach(async () => {
    otel = new OtelHarness()
    mq = await AceMq.connect(new InMemoryTransport())
    uninstall = instrument(mq, {
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    })
  })

  afterEach(async () => {
    uninstall()
    await mq.close({ drainTimeout: 0 })
    await otel.shutdown()
  })

  async function halted(queue: string): Promise<number | undefined> {
    const metric = await otel.metric(ACEMQ_METRICS.orderedPartitionsHalted)
    const point = metric?.dataPoints.find((p) => p.attributes['queue'] === queue)
    return point?.value as number | undefined
  }

  it('reports the halted partitions of each ordered queue as a gauge, by its name', async () => {
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(4)
      .keyedBy((entry) => entry.account)
      .onFailure('stop', { attempts: 1 })
      .declare()
    await mq.ordered('audit').declare()
    let fixed = false
    await ledger.consume((message) => {
      if (message.payload.poison === true && !fixed) throw new Error('bad entry')
    })
    expect([await halted('ledger'), await halted('audit')]).toEqual([0, 0])
    const accounts = ['acct-0', 'acct-1', 'acct-2', 'acct-3', 'acct-4', 'acct-5']
    const partitions = new Set(accounts.map((a) => ledger.partitionOf(a)))
    for (const account of accounts) await ledger.send({ account, poison: true })
    await eventually(
      () => ledger.haltedPartitions.length === partitions.size,
      5_000,
      'every poisoned partition halted',
    )
    expect(await halted('ledger')).toBe(partitions.size)
    expect(await halted('audit')).toBe(0)
    fixed = true
    for (const p of ledger.haltedPartitions) ledger.resume(p)
    await eventually(() => ledger.handled === accounts.length, 5_000, 'the resumed entries')
    expect(await halted('ledger')).toBe(0)
  })

  it('counts consumed messages per partition queue with the existing consume metrics', async () => {
    const ledger = await mq
      .ordered<Entry>('ledger')
      .partitions(2)
      .keyedBy((entry) => entry.account)
      .onFailure('skip', { attempts: 2, delay: 1 })
      .declare()
    const a = 'acct-0'
    const b = ['acct-1', 'acct-2', 'acct-3', 'acct-4'].find(
      (k) => ledger.partitionOf(k) !== ledger.partitionOf(a),
    ) as string
    await ledger.consume((message) => {
      if (message.payload.poison === true) throw new Error('bad entry')
    })
    await ledger.send({ account: a })
    await ledger.send({ account: a })
    await ledger.send({ account: b, poison: true })
    await eventually(() => ledger.handled === 2 && ledger.skipped === 1, 5_000, 'all settled')
    const qa = ledger.queueFor(ledger.partitionOf(a))
    const qb = ledger.queueFor(ledger.partitionOf(b))
    await eventually(
      async () => (await otel.sum(ACEMQ_METRICS.consumeTotal)) === 3,
      5_000,
      'three settlements counted',
    )
    expect(await otel.sum(ACEMQ_METRICS.consumeTotal, { queue: qa, outcome: 'acked' })).toBe(2)
    expect(
      await otel.sum(ACEMQ_METRICS.consumeTotal, { queue: qb, outcome: 'dead_lettered' }),
    ).toBe(1)
    expect(
      await otel.sum(ACEMQ_METRICS.messagesDeadLetteredTotal, {
        queue: qb,
        outcome: 'dead_lettered',
      }),
    ).toBe(1)
    // One span per delivery, with an event for the run in place before it was given up on.
    const [span] = otel.spans(`${qb} process`)
    expect(span?.events.map((e) => e.name)).toEqual(['message.retried', 'message.dead_lettered'])
  })
})
