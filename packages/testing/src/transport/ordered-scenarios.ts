import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  AceMq,
  ConfigurationError,
  FatalError,
  Topology,
  type HealthReport,
  type Message,
  type OrderedQueue,
} from '@acemq/core'
import {
  ORDERED_KEY_HEADER,
  readEnvelope,
  type OrderedConsumer,
  type OrderedQueueBuilder,
} from '@acemq/core/spi'
import {
  openScenario,
  type BrokerProbe,
  type ScenarioConnection,
  type ScenarioTarget,
} from './engine-scenarios.js'
import { eventually } from '../helpers/eventually.js'
import { uniqueName } from '../services/services.js'

/** A ledger entry: the n-th entry of an account. */
export interface Entry {
  readonly account: string
  readonly seq: number
  readonly poison?: boolean
}

/**
 * Records what a handler saw, per key, and checks the order: each key's entries must come
 * 1, 2, 3 … with nothing skipped and nothing going back — except that the entry handled last
 * may come again right after itself (a redelivery after a lost channel: at least once).
 */
export class OrderLog {
  readonly #last = new Map<string, number>()
  readonly violations: string[] = []
  /** Entries checked against the one before them. */
  checks = 0
  /** Entries seen again right after themselves (redelivered). */
  repeats = 0

  record(entry: Entry): void {
    const last = this.#last.get(entry.account) ?? 0
    this.checks++
    if (entry.seq === last) this.repeats++
    else if (entry.seq !== last + 1) {
      this.violations.push(`${entry.account}: ${entry.seq} after ${last}`)
    }
    this.#last.set(entry.account, Math.max(last, entry.seq))
  }

  /** The highest entry seen of each account. */
  lastOf(account: string): number {
    return this.#last.get(account) ?? 0
  }

  /** Whether every account has reached `seq`. */
  reached(accounts: readonly string[], seq: number): boolean {
    return accounts.every((account) => this.lastOf(account) >= seq)
  }
}

/** `count` account names whose partitions (of `partitions`) cover every partition. */
export function accountsCovering(
  queue: OrderedQueue<Entry>,
  count: number,
  prefix = 'acct',
): string[] {
  const accounts = Array.from({ length: count }, (_, i) => `${prefix}-${i}`)
  const covered = new Set(accounts.map((a) => queue.partitionOf(a)))
  expect(covered.size).toBe(Math.min(queue.partitions, count))
  return accounts
}

/** An account that lands on `partition`, and one that does not. */
export function accountOn(queue: OrderedQueue<Entry>, partition: number, not = false): string {
  for (let i = 0; ; i++) {
    const account = `acct-${i}`
    if ((queue.partitionOf(account) === partition) !== not) return account
  }
}

function orderedReport(reports: readonly HealthReport[], name: string): HealthReport {
  const report = reports.find((r) => r.name === `ordered:${name}`)
  expect(report, `the ordered:${name} health report`).toBeDefined()
  return report as HealthReport
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Ordered queues (partitions by key, failure modes, halts, resume, drain and close) on every
 * transport: the in-memory one and the real broker. Each scenario uses its own ordered queue.
 */
export function orderedScenarios(name: string, target: ScenarioTarget): void {
  describe(`ordered queues on ${name}`, () => {
    let mq: AceMq
    let probe: BrokerProbe & { close(): Promise<void> }
    let connection: ScenarioConnection
    const names: string[] = []
    const consumers: OrderedConsumer[] = []

    beforeEach(async () => {
      connection = await openScenario(target)
      ;({ mq, probe } = connection)
    })

    afterEach(async () => {
      for (const consumer of consumers.splice(0)) await consumer.close({ drainTimeout: 0 })
      await mq.close({ drainTimeout: 0 })
      for (const ordered of names.splice(0)) {
        for (let p = 0; p < 8; p++) {
          for (const suffix of ['', '.dlq', '.parked'])
            await probe.deleteQueue(`${ordered}.${p}${suffix}`)
        }
      }
      await probe.close()
    })

    async function ledger(
      configure: (builder: OrderedQueueBuilder<Entry>) => OrderedQueueBuilder<Entry> = (b) => b,
    ): Promise<OrderedQueue<Entry>> {
      const ordered = uniqueName('ledger')
      names.push(ordered)
      return configure(mq.ordered<Entry>(ordered).keyedBy((entry) => entry.account)).declare()
    }

    async function consume(
      queue: OrderedQueue<Entry>,
      handler: (message: Message<Entry>) => unknown,
    ): Promise<OrderedConsumer> {
      const consumer = await queue.consume(async (m) => {
        await handler(m)
      })
      consumers.push(consumer)
      return consumer
    }

    it('keeps each account in order while the partitions run in parallel, one message at a time each', async () => {
      const queue = await ledger((b) => b.partitions(4))
      const accounts = accountsCovering(queue, 40)
      const perAccount = 25
      const log = new OrderLog()
      const running = new Map<string, number>()
      let busiestPartition = 0
      let mostPartitionsAtOnce = 0
      await consume(queue, async (m) => {
        running.set(m.queue, (running.get(m.queue) ?? 0) + 1)
        busiestPartition = Math.max(busiestPartition, running.get(m.queue) ?? 0)
        const active = [...running.values()].filter((n) => n > 0).length
        mostPartitionsAtOnce = Math.max(mostPartitionsAtOnce, active)
        if (m.payload.seq % 5 === 0) await sleep(2)
        else await Promise.resolve()
        log.record(m.payload)
        running.set(m.queue, (running.get(m.queue) ?? 1) - 1)
      })
      const sends: Promise<void>[] = []
      for (let seq = 1; seq <= perAccount; seq++) {
        for (const account of accounts) sends.push(queue.send({ account, seq }))
        // Each account's entries are sent in order: the send of seq n+1 starts after n is confirmed.
        await Promise.all(sends.splice(0))
      }
      await eventually(() => log.reached(accounts, perAccount), 30_000, 'every entry handled')
      expect(log.violations).toEqual([])
      expect(log.checks).toBe(accounts.length * perAccount)
      expect(log.repeats).toBe(0)
      expect(busiestPartition).toBe(1)
      expect(mostPartitionsAtOnce).toBeGreaterThan(1)
      expect(queue.handled).toBe(accounts.length * perAccount)
      expect(queue.failed).toBe(0)
    })

    it('halts a partition on a poison entry: it stays unacknowledged, nothing behind it runs, the others go on, health is DEGRADED, and resume(p) runs it again', async () => {
      const queue = await ledger((b) =>
        b.partitions(4).onFailure('stop', { attempts: 2, delay: 20 }),
      )
      const poisoned = accountOn(queue, 1)
      const others = [0, 2, 3].map((p) => accountOn(queue, p))
      const log = new OrderLog()
      let poisonRuns = 0
      let fixed = false
      await consume(queue, (m) => {
        if (m.payload.poison === true) {
          poisonRuns++
          if (!fixed) throw new Error('amount is not a number')
        }
        log.record(m.payload)
      })
      await queue.send({ account: poisoned, seq: 1 })
      await queue.send({ account: poisoned, seq: 2, poison: true })
      await queue.send({ account: poisoned, seq: 3 })
      for (const account of others) {
        for (let seq = 1; seq <= 3; seq++) await queue.send({ account, seq })
      }
      await eventually(() => queue.haltedPartitions.length === 1, 10_000, 'the partition halted')
      await eventually(() => log.reached(others, 3), 10_000, 'the other partitions handled')
      expect(queue.haltedPartitions).toEqual([1])
      expect(poisonRuns).toBe(2)
      await sleep(100)
      expect(log.lastOf(poisoned)).toBe(1)
      expect(poisonRuns).toBe(2)
      // Held, not running: nothing in flight, and a drain does not wait for it.
      expect(mq.inFlight).toBe(0)
      const drainStarted = Date.now()
      expect(await mq.drainConsumers('10s')).toBe(true)
      expect(Date.now() - drainStarted).toBeLessThan(1_000)
      mq.resumeConsuming()
      expect(queue.haltedPartitions).toEqual([1])
      // Never dead-lettered; the entry behind it waits in the partition's queue.
      expect(await probe.count(`${queue.queueFor(1)}.dlq`)).toBe(0)
      expect(await probe.count(queue.queueFor(1))).toBe(1)
      const health = await mq.health()
      expect(health.status).toBe('DEGRADED')
      expect(orderedReport(health.reports, queue.name)).toEqual({
        name: `ordered:${queue.name}`,
        status: 'DEGRADED',
        details: { partitions: '4', handled: '10', failed: '2', skipped: '0', halted: '1' },
      })
      expect(queue.resume(0)).toBe(false)
      fixed = true
      expect(queue.resume(1)).toBe(true)
      await eventually(() => log.lastOf(poisoned) === 3, 10_000, 'the partition going on')
      expect(log.violations).toEqual([])
      expect(poisonRuns).toBe(3)
      expect(queue.haltedPartitions).toEqual([])
      expect(orderedReport((await mq.health()).reports, queue.name).status).toBe('UP')
      expect(await probe.count(`${queue.queueFor(1)}.dlq`)).toBe(0)
    })

    it('starts the attempts over on resume, and halts again when the entry still fails', async () => {
      const queue = await ledger((b) =>
        b.partitions(2).onFailure('stop', { attempts: 3, delay: 5 }),
      )
      const account = accountOn(queue, 0)
      let runs = 0
      await consume(queue, () => {
        runs++
        throw new Error('still broken')
      })
      await queue.send({ account, seq: 1 })
      await eventually(() => queue.haltedPartitions.length === 1, 10_000, 'the halt')
      expect(runs).toBe(3)
      queue.resume(0)
      await eventually(
        () => runs === 6 && queue.haltedPartitions.length === 1,
        10_000,
        'a second halt',
      )
      expect(queue.failed).toBe(6)
      expect(await probe.count(`${queue.queueFor(0)}.dlq`)).toBe(0)
    })

    it('hands a halted entry back on close, in its place: the next consumer gets it before the entries behind it', async () => {
      const queue = await ledger((b) =>
        b.partitions(2).onFailure('stop', { attempts: 1, delay: 0 }),
      )
      const account = accountOn(queue, 1)
      const consumer = await consume(queue, (m) => {
        if (m.payload.poison === true) throw new Error('bad entry')
      })
      await queue.send({ account, seq: 1, poison: true })
      await queue.send({ account, seq: 2 })
      await queue.send({ account, seq: 3 })
      await eventually(() => queue.haltedPartitions.length === 1, 10_000, 'the halt')
      const closing = Date.now()
      await consumer.close()
      expect(Date.now() - closing).toBeLessThan(3_000)
      expect(queue.haltedPartitions).toEqual([])
      await eventually(
        async () => (await probe.count(queue.queueFor(1))) === 3,
        10_000,
        'the three entries back in the partition queue',
      )
      expect(await probe.count(`${queue.queueFor(1)}.dlq`)).toBe(0)
      const log = new OrderLog()
      await consume(queue, (m) => log.record(m.payload))
      await eventually(() => log.lastOf(account) === 3, 10_000, 'the entries handled')
      expect(log.violations).toEqual([])
      expect(log.checks).toBe(3)
    })

    it('closes the connection at once with a halted partition, handing its entry back', async () => {
      const queue = await ledger((b) =>
        b.partitions(1).onFailure('stop', { attempts: 1, delay: 0 }),
      )
      await consume(queue, () => {
        throw new Error('bad entry')
      })
      await queue.send({ account: 'acct-1', seq: 1 })
      await eventually(() => queue.haltedPartitions.length === 1, 10_000, 'the halt')
      const closing = Date.now()
      await mq.close()
      expect(Date.now() - closing).toBeLessThan(3_000)
      await eventually(
        async () => (await probe.count(queue.queueFor(0))) === 1,
        10_000,
        'the entry back in its queue',
      )
      expect(await probe.count(`${queue.queueFor(0)}.dlq`)).toBe(0)
    })

    it('skips a poison entry to {name}.{p}.dlq with its reason and goes on in order', async () => {
      const queue = await ledger((b) =>
        b.partitions(2).onFailure('skip', { attempts: 3, delay: 5 }),
      )
      const account = accountOn(queue, 0)
      const log = new OrderLog()
      let poisonRuns = 0
      await consume(queue, (m) => {
        if (m.payload.poison === true) {
          poisonRuns++
          throw new Error('amount is not a number')
        }
        log.record(m.payload)
      })
      await queue.send({ account, seq: 1 })
      await queue.send({ account, seq: 2, poison: true }, { id: 'entry-2' })
      await queue.send({ account, seq: 3 })
      const dlq = `${queue.queueFor(0)}.dlq`
      await eventually(async () => (await probe.count(dlq)) === 1, 10_000, 'the entry on the dlq')
      await eventually(() => log.lastOf(account) === 3, 10_000, 'the entries after it')
      expect(poisonRuns).toBe(3)
      expect(log.checks).toBe(2)
      expect(log.violations).toEqual([`${account}: 3 after 1`])
      const copy = await probe.get(dlq)
      const envelope = readEnvelope(copy?.headers ?? {}, {
        messageId: copy?.messageId,
        routingKey: queue.queueFor(0),
      }).envelope
      expect(envelope.id).toBe('entry-2')
      expect(envelope.error).toBe('gave up after 3 attempt(s): amount is not a number')
      // The key travels with the entry, for an operator looking into the partition's dead letters.
      expect(copy?.headers?.[ORDERED_KEY_HEADER]).toBe(account)
      expect(JSON.parse(Buffer.from(copy?.body ?? []).toString())).toEqual({
        account,
        seq: 2,
        poison: true,
      })
      expect([queue.skipped, queue.failed, queue.handled]).toEqual([1, 3, 2])
      expect(queue.haltedPartitions).toEqual([])
    })

    it('retries in place past its attempts and never gives up, keeping the entries behind it waiting', async () => {
      const queue = await ledger((b) =>
        b.partitions(1).onFailure('retry-in-place', { attempts: 1, delay: 5 }),
      )
      const log = new OrderLog()
      let failuresLeft = 6
      await consume(queue, (m) => {
        if (m.payload.seq === 1 && failuresLeft > 0) {
          failuresLeft--
          throw new Error('ledger locked')
        }
        log.record(m.payload)
      })
      for (let seq = 1; seq <= 3; seq++) await queue.send({ account: 'acct-1', seq })
      await eventually(() => log.lastOf('acct-1') === 3, 10_000, 'every entry handled')
      expect(log.violations).toEqual([])
      expect([queue.failed, queue.handled, queue.skipped]).toEqual([6, 3, 0])
      expect(queue.haltedPartitions).toEqual([])
    })

    it('moves an entry whose handler throws a FatalError to {name}.{p}.dlq at once, whatever the mode', async () => {
      const queue = await ledger((b) =>
        b.partitions(1).onFailure('stop', { attempts: 5, delay: 5 }),
      )
      let runs = 0
      await consume(queue, () => {
        runs++
        throw new FatalError('unknown account')
      })
      await queue.send({ account: 'acct-1', seq: 1 })
      const dlq = `${queue.queueFor(0)}.dlq`
      await eventually(async () => (await probe.count(dlq)) === 1, 10_000, 'the entry on the dlq')
      expect(runs).toBe(1)
      expect(queue.haltedPartitions).toEqual([])
      expect([queue.skipped, queue.failed]).toEqual([1, 1])
    })

    it('refuses another partition count than the broker holds, declaring nothing', async () => {
      const ordered = uniqueName('ledger')
      names.push(ordered)
      // Four partitions declared earlier (by another process, or another AceMQ library).
      let existing = Topology.define()
      for (let p = 0; p < 4; p++) {
        existing = existing.queueWithDeadLetter(`${ordered}.${p}`, {
          arguments: { 'x-single-active-consumer': true },
        })
      }
      await mq.applyTopology(existing)
      for (const partitions of [8, 2]) {
        const refused = mq.ordered(ordered).partitions(partitions).declare()
        await expect(refused).rejects.toThrow(ConfigurationError)
        await expect(refused).rejects.toThrow(
          `ordered queue '${ordered}' exists on the broker with 4 partition(s)`,
        )
        await expect(refused).rejects.toThrow(/Nothing was declared/)
      }
      for (let p = 4; p < 8; p++) expect(await probe.count(`${ordered}.${p}`)).toBeUndefined()
      expect((await mq.health()).reports.map((r) => r.name)).not.toContain(`ordered:${ordered}`)
      const declared = await mq.ordered(ordered).partitions(4).declare()
      expect(declared.queues).toEqual([0, 1, 2, 3].map((p) => `${ordered}.${p}`))
    })
  })
}
