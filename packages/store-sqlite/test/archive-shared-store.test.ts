import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { AceMq, DeadLetterArchive, InMemoryTransport, RetryPolicy, Topology } from '@acemq/core'
import { eventually } from '@acemq/testing'
import { SqliteArchiveStore } from '../src/index.js'

// Two processes' collectors on one dead-letter queue, sharing one archive file: as an operator
// runs them (one per replica). Every dead letter is archived once, acked, and none is lost.
describe('two dead-letter archives sharing one SQLite store', () => {
  const cleanups: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  })

  it('archives each of 40 dead letters exactly once and leaves the queue empty', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'acemq-archive-shared-'))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const transport = new InMemoryTransport()
    const mq = await AceMq.connect(transport)
    cleanups.push(() => mq.close())
    await mq.applyTopology(Topology.define().queueWithRetry('orders', RetryPolicy.none()))
    const stores = [0, 1].map(() => new SqliteArchiveStore(join(dir, 'archive.db')))
    for (const store of stores) cleanups.push(() => store.close())
    const collectors = await Promise.all(
      stores.map((store) =>
        new DeadLetterArchive({ transport: mq.transport, store }).collect(['orders.dlq'], {
          prefetch: 5,
        }),
      ),
    )
    for (const collector of collectors) cleanups.push(() => collector.close())

    const dead = mq.publisher<{ n: number }>('', 'orders.dlq')
    const ids = Array.from({ length: 40 }, (_, n) => `dead-${n}`)
    await Promise.all(ids.map((id, n) => dead.send({ n }, { id })))

    const reader = new DeadLetterArchive({ transport: mq.transport, store: stores[0]! })
    const archived = async (): Promise<string[]> =>
      (await reader.find({ queue: 'orders.dlq', limit: 100 })).messages.map((m) => m.messageId)
    await eventually(async () => (await archived()).length >= ids.length, 10_000, 'all 40 archived')
    // Give a late second copy time to show itself, then count: each message once, none lost.
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await archived()).sort()).toStrictEqual([...ids].sort())
    expect(await transport.queueLength?.('orders.dlq')).toBe(0)
  })
})
