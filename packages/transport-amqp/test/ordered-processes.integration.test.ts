import { fork, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
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
const here = path.dirname(fileURLToPath(import.meta.url))

interface Handled {
  readonly pid: number
  readonly entry: Entry
  readonly queue: string
  readonly at: number
}

/** A process consuming the ordered queue (support/ordered-consumer.ts), reporting over IPC. */
function startConsumer(
  url: string,
  name: string,
  partitions: number,
  handled: Handled[],
  env: Record<string, string> = {},
): { child: ChildProcess; consuming: Promise<void>; failed: Entry[] } {
  const failed: Entry[] = []
  const child = fork(path.join(here, 'support', 'ordered-consumer.ts'), [], {
    execArgv: ['--conditions=@acemq/source', '--import', 'tsx'],
    env: {
      ...process.env,
      ORDERED_URL: url,
      ORDERED_NAME: name,
      ORDERED_PARTITIONS: String(partitions),
      ORDERED_HANDLER_MS: '2',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const consuming = new Promise<void>((resolve, reject) => {
    child.on('message', (message: { type: string; pid: number; entry?: Entry; queue?: string }) => {
      if (message.type === 'consuming') resolve()
      else if (message.type === 'failed' && message.entry !== undefined) failed.push(message.entry)
      else if (message.entry !== undefined && message.queue !== undefined) {
        handled.push({
          pid: message.pid,
          entry: message.entry,
          queue: message.queue,
          at: Date.now(),
        })
      }
    })
    child.once('exit', (code, signal) =>
      reject(new Error(`the consumer exited (${code ?? signal})`)),
    )
  })
  return { child, consuming, failed }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

describe.runIf(hasRabbit)('an ordered queue consumed by two processes', () => {
  let vhost: BrokerVhost
  let releaseLock: (() => Promise<void>) | undefined
  beforeAll(async () => {
    releaseLock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-ordered-processes')
  }, LOCK_WAIT_TIMEOUT)
  afterAll(async () => {
    await vhost?.delete()
    await releaseLock?.()
  })

  it('has one active consumer per partition, and when that process is killed the other takes over where it stopped, in order', async () => {
    const name = uniqueName('ledger')
    const partitions = 4
    await using mq = await AceMq.connect(new AmqpTransport(vhost.url))
    const ledger = await mq
      .ordered<Entry>(name)
      .partitions(partitions)
      .keyedBy((entry) => entry.account)
      .declare()
    const accounts = accountsCovering(ledger, 24)
    const perAccount = 25
    const handled: Handled[] = []
    const first = startConsumer(vhost.url, name, partitions, handled)
    let second: ReturnType<typeof startConsumer> | undefined
    try {
      await first.consuming
      second = startConsumer(vhost.url, name, partitions, handled)
      await second.consuming
      const sending = (async () => {
        for (let seq = 1; seq <= perAccount; seq++) {
          await Promise.all(accounts.map((account) => ledger.send({ account, seq })))
        }
      })()
      // The first process subscribed first: it is the active consumer of every partition.
      await eventually(() => handled.length >= 150, 30_000, '150 entries handled')
      const killedAt = Date.now()
      first.child.kill('SIGKILL')
      await exited(first.child)
      await sending
      const log = new OrderLog()
      await eventually(
        () => {
          while (log.checks < handled.length) log.record((handled[log.checks] as Handled).entry)
          return log.reached(accounts, perAccount)
        },
        60_000,
        'every entry handled',
      )
      const byFirst = handled.filter((h) => h.pid === first.child.pid)
      const bySecond = handled.filter((h) => h.pid === second?.child.pid)
      expect(log.violations).toEqual([])
      expect(log.checks).toBe(accounts.length * perAccount + log.repeats)
      // At most the entry each partition had in hand when the process died comes again.
      expect(log.repeats).toBeLessThanOrEqual(partitions)
      expect(byFirst.length).toBeGreaterThanOrEqual(150)
      expect(byFirst.length + bySecond.length).toBe(handled.length)
      // While the first lived, the second (waiting its turn) handled nothing; then it took
      // over every partition.
      expect(bySecond.every((h) => h.at >= killedAt)).toBe(true)
      expect(new Set(bySecond.map((h) => h.queue))).toEqual(new Set(ledger.queues))
      console.log(
        `two processes: ${log.checks} order checks over ${accounts.length} accounts, ${byFirst.length} handled before the kill, ${bySecond.length} after, ${log.repeats} redelivered`,
      )
    } finally {
      first.child.kill('SIGKILL')
      if (second?.child.connected === true) second.child.disconnect()
      if (second !== undefined) await exited(second.child)
      await exited(first.child)
    }
  }, 120_000)

  it('hands a halted partition to the other process in its place when the first one closes gracefully', async () => {
    const name = uniqueName('ledger')
    const partitions = 4
    await using mq = await AceMq.connect(new AmqpTransport(vhost.url))
    const ledger = await mq
      .ordered<Entry>(name)
      .partitions(partitions)
      .keyedBy((entry) => entry.account)
      .declare()
    const accounts = accountsCovering(ledger, 12)
    const perAccount = 10
    const poisoned = accounts[0] as string
    const handled: Handled[] = []
    // The poison entry fails in the first process only.
    const first = startConsumer(vhost.url, name, partitions, handled, { ORDERED_FAIL_POISON: '1' })
    let second: ReturnType<typeof startConsumer> | undefined
    try {
      await first.consuming
      second = startConsumer(vhost.url, name, partitions, handled)
      await second.consuming
      for (let seq = 1; seq <= perAccount; seq++) {
        await Promise.all(
          accounts.map((account) =>
            ledger.send({
              account,
              seq,
              ...(account === poisoned && seq === 3 ? { poison: true } : {}),
            }),
          ),
        )
      }
      await eventually(
        () => first.failed.length === 1,
        30_000,
        'the poison entry halting its partition',
      )
      // Everything but the halted partition's account goes on in the first process.
      const others = accounts.filter((a) => ledger.partitionOf(a) !== ledger.partitionOf(poisoned))
      await eventually(
        () =>
          others.every((a) =>
            handled.some((h) => h.entry.account === a && h.entry.seq === perAccount),
          ),
        30_000,
        'the other partitions handled',
      )
      expect(handled.every((h) => h.pid === first.child.pid)).toBe(true)
      first.child.send({ type: 'close' })
      await exited(first.child)
      const log = new OrderLog()
      await eventually(
        () => {
          while (log.checks < handled.length) log.record((handled[log.checks] as Handled).entry)
          return log.reached(accounts, perAccount)
        },
        30_000,
        'every entry handled',
      )
      expect(log.violations).toEqual([])
      expect(log.repeats).toBe(0)
      expect(log.checks).toBe(accounts.length * perAccount)
      // The second process took the halted entry first, then the ones behind it.
      const taken = handled.filter((h) => h.pid === second?.child.pid)
      expect(taken[0]?.entry).toEqual({ account: poisoned, seq: 3, poison: true })
      console.log(
        `graceful handover: ${log.checks} order checks over ${accounts.length} accounts, ${taken.length} handled by the second process`,
      )
    } finally {
      first.child.kill('SIGKILL')
      if (second?.child.connected === true) second.child.disconnect()
      if (second !== undefined) await exited(second.child)
      await exited(first.child)
    }
  }, 120_000)
})
