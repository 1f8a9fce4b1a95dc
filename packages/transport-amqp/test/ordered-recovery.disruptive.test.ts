import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { AceMq } from '@acemq/core'
import { BrokerVhost } from '../../../test-support/broker-vhost.js'
import {
  eventually,
  OrderLog,
  accountsCovering,
  type Entry,
  requireRabbit,
  uniqueName,
} from '@acemq/testing'
import { AmqpTransport } from '../src/index.js'
import { LOCK_WAIT_TIMEOUT, holdBrokerFaultLock } from './support/broker.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('an ordered queue when RabbitMQ closes its connections', () => {
  let vhost: BrokerVhost
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-ordered-recovery')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  it('keeps every account in order through two forced connection closes (recovery never reorders a partition)', async () => {
    await using mq = await AceMq.connect(
      new AmqpTransport(vhost.url, {
        connectionName: 'acemq-ordered-recovery',
        recovery: { initialDelay: 100, maxDelay: 500 },
      }),
    )
    const partitions = 4
    const ledger = await mq
      .ordered<Entry>(uniqueName('ledger'))
      .partitions(partitions)
      .keyedBy((entry) => entry.account)
      .declare()
    const accounts = accountsCovering(ledger, 40)
    const perAccount = 25
    for (let seq = 1; seq <= perAccount; seq++) {
      await Promise.all(accounts.map((account) => ledger.send({ account, seq })))
    }
    const log = new OrderLog()
    await ledger.consume(async (message) => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      log.record(message.payload)
    })
    const total = accounts.length * perAccount
    for (const after of [300, 650]) {
      await eventually(() => log.checks >= after, 60_000, `${after} entries handled`)
      await vhost.closeAllConnections()
      await eventually(() => !mq.transport.state.open, 10_000, 'the connection lost')
      await eventually(() => mq.transport.state.open, 20_000, 'the connection recovered')
    }
    await eventually(() => log.reached(accounts, perAccount), 60_000, 'every entry handled')
    expect(log.violations).toEqual([])
    expect(log.checks).toBe(total + log.repeats)
    // Only an entry whose ack the close cut off comes again: at most one per partition each time.
    expect(log.repeats).toBeLessThanOrEqual(2 * partitions)
    expect(ledger.haltedPartitions).toEqual([])
    console.log(
      `forced closes: ${log.checks} order checks over ${accounts.length} accounts, ${log.repeats} redelivered after a close`,
    )
  }, 120_000)

  it('keeps a halted partition halted through a forced close, without running the entry again, until resume', async () => {
    await using mq = await AceMq.connect(
      new AmqpTransport(vhost.url, {
        connectionName: 'acemq-ordered-recovery',
        recovery: { initialDelay: 100, maxDelay: 500 },
      }),
    )
    const ledger = await mq
      .ordered<Entry>(uniqueName('ledger'))
      .partitions(1)
      .keyedBy((entry) => entry.account)
      .onFailure('stop', { attempts: 2, delay: 10 })
      .declare()
    const log = new OrderLog()
    let poisonRuns = 0
    let fixed = false
    await ledger.consume((message) => {
      if (message.payload.poison === true) {
        poisonRuns++
        if (!fixed) throw new Error('bad entry')
      }
      log.record(message.payload)
    })
    await ledger.send({ account: 'acct-1', seq: 1 })
    await ledger.send({ account: 'acct-1', seq: 2, poison: true })
    await ledger.send({ account: 'acct-1', seq: 3 })
    await eventually(() => ledger.haltedPartitions.length === 1, 10_000, 'the halt')
    expect(poisonRuns).toBe(2)
    await vhost.closeAllConnections()
    await eventually(() => !mq.transport.state.open, 10_000, 'the connection lost')
    await eventually(() => mq.transport.state.open, 20_000, 'the connection recovered')
    // The entry comes back and halts the partition again without a third run.
    await eventually(
      async () => (await vhost.counts(ledger.queueFor(0)))?.unacked === 1,
      20_000,
      'the entry held again',
    )
    expect(poisonRuns).toBe(2)
    expect(ledger.haltedPartitions).toEqual([0])
    expect((await mq.health()).status).toBe('DEGRADED')
    expect(log.lastOf('acct-1')).toBe(1)
    fixed = true
    ledger.resume(0)
    await eventually(() => log.lastOf('acct-1') === 3, 10_000, 'the partition going on')
    expect(log.violations).toEqual([])
    expect(poisonRuns).toBe(3)
  }, 120_000)
})
