import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeadLetterArchive, type AceMq, type DeadLetterArchiveStore } from '@acemq/core'
import type { ArchivedMessage, Delivery } from '@acemq/core/spi'
import { SqliteArchiveStore } from '@acemq/store-sqlite'
import { connect } from '@acemq/transport-amqp'
import { eventually, requireRabbit } from '@acemq/testing'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { BrokerVhost } from '../../test-support/broker-vhost.js'

const hasRabbit = await requireRabbit()

/** Headers of every AMQP field type amqplib writes, as a sibling library might send them. */
const HEADERS = {
  'x-acemq-id': 'archived-1',
  'x-acemq-type': 'order.placed',
  'x-acemq-attempt': { '!': 'int', value: 3 },
  'x-acemq-first-seen': { '!': 'long', value: 1_796_000_000_000 },
  'x-acemq-error': 'gave up after 3 attempt(s): boom',
  'x-byte': { '!': 'byte', value: -7 },
  'x-short': { '!': 'short', value: 300 },
  'x-unsigned-int': { '!': 'unsignedint', value: 4_000_000_000 },
  'x-float': { '!': 'float', value: 1.5 },
  'x-double': { '!': 'double', value: 2.25 },
  'x-timestamp': { '!': 'timestamp', value: 1_700_000_000 },
  'x-bytes': Buffer.from([0, 1, 254, 255]),
  'x-bool': true,
  'x-void': null,
  'x-array': [1, 'two', { '!': 'long', value: 3 }],
  'x-table': { nested: { '!': 'int', value: 9 }, $odd: 'key' },
}

const PROPERTIES = {
  contentType: 'application/octet-stream',
  contentEncoding: 'identity',
  messageId: 'archived-1',
  correlationId: 'corr-1',
  replyTo: 'replies',
  timestamp: 1_700_000_000,
  type: 'order.placed',
  appId: 'billing',
  priority: 4,
}

const BODY = Buffer.from(Array.from({ length: 256 }, (_, i) => i))

/**
 * What a replay writes anew or drops (docs/design.md §18), as `acemq dlq replay` does, and the
 * envelope headers it writes when the message had none: left out of the comparison.
 */
const REWRITTEN = new Set([
  'x-acemq-correlation',
  'x-acemq-version',
  'x-acemq-error',
  'x-acemq-attempt',
  'acemq-replayed-from',
  'acemq-replayed-at',
  'acemq-replay-count',
])

function kept(headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([key]) => !REWRITTEN.has(key)))
}

describe.runIf(hasRabbit)('the dead-letter archive on the real broker', () => {
  let vhost: BrokerVhost
  let admin: AmqpAdmin
  let mq: AceMq
  let dir: string
  let store: SqliteArchiveStore

  beforeAll(async () => {
    vhost = await BrokerVhost.create('acemq-archive')
    admin = await AmqpAdmin.open(vhost.url)
    for (const queue of ['orders', 'orders.dlq', 'orders.reference']) {
      await admin.channel.assertQueue(queue, { durable: true })
    }
    mq = await connect(vhost.url, { connectionName: 'acemq-archive-test' })
    dir = mkdtempSync(path.join(tmpdir(), 'acemq-archive-e2e-'))
    store = new SqliteArchiveStore(path.join(dir, 'archive.db'))
  })

  afterAll(async () => {
    await mq?.close()
    await admin?.close()
    store?.close()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    await vhost?.delete()
  })

  it('archives a dead letter, acks it only once kept, and replays it with every header and property as it travelled', async () => {
    // The same message to the dead-letter queue and to a reference queue left alone.
    for (const queue of ['orders.dlq', 'orders.reference']) {
      admin.channel.sendToQueue(queue, BODY, { persistent: true, headers: HEADERS, ...PROPERTIES })
    }
    await admin.channel.waitForConfirms()
    const archive = new DeadLetterArchive({ transport: mq.transport, store })
    const collector = await archive.collect(['orders.dlq'])
    await eventually(() => collector.archived === 1, 10_000, 'the dead letter archived')
    await eventually(
      async () => {
        const counts = await vhost.counts('orders.dlq')
        return counts?.ready === 0 && counts.unacked === 0
      },
      10_000,
      'the dead letter acked',
    )
    await collector.close()

    const [message] = (await archive.find({ id: 'archived-1' })).messages
    expect(message).toMatchObject({
      queue: 'orders.dlq',
      attempt: 3,
      reason: HEADERS['x-acemq-error'],
    })
    expect(await archive.replay([message?.id as string], { actor: 'e2e' })).toEqual({
      changed: 1,
      skipped: [],
    })

    const getOne = mq.transport.getOne?.bind(mq.transport) as (
      q: string,
    ) => Promise<Delivery | undefined>
    await admin.waitForCount('orders', 1)
    const copy = (await getOne('orders')) as Delivery
    const reference = (await getOne('orders.reference')) as Delivery
    copy.ack()
    reference.ack()
    expect(Buffer.from(copy.body).equals(BODY)).toBe(true)
    expect(kept(copy.wireHeaders ?? {})).toEqual(kept(reference.wireHeaders ?? {}))
    expect(copy.properties).toEqual(reference.properties)
    expect(copy.headers['acemq-replayed-from']).toBe('orders.dlq')
  })

  it('acks nothing the store could not keep: the message stays on the broker and is archived once the store works again', async () => {
    admin.channel.sendToQueue('orders.dlq', BODY, {
      persistent: true,
      headers: { ...HEADERS, 'x-acemq-id': 'store-down-1' },
    })
    await admin.channel.waitForConfirms()
    let failures = 2
    const errors: unknown[] = []
    // The real store behind a fault: its first two writes fail, as a database that is down would.
    const flaky: DeadLetterArchiveStore = {
      add: (message: ArchivedMessage) =>
        failures-- > 0 ? Promise.reject(new Error('database is down')) : store.add(message),
      get: (id) => store.get(id),
      find: (filter) => store.find(filter),
      mark: (ids, mark) => store.mark(ids, mark),
      purge: (before) => store.purge(before),
      audit: (entry) => store.audit(entry),
      auditLog: (options) => store.auditLog(options),
    }
    const archive = new DeadLetterArchive({ transport: mq.transport, store: flaky })
    const collector = await archive.collect(['orders.dlq'], { onError: (e) => errors.push(e) })
    try {
      await eventually(() => errors.length === 1, 5_000, 'the first failure reported')
      // Not acked: the broker still holds it (handed out, or back in the queue).
      const held = await vhost.counts('orders.dlq')
      expect((held?.ready ?? 0) + (held?.unacked ?? 0)).toBe(1)
      await eventually(() => collector.archived === 1, 10_000, 'archived once the store works')
      await eventually(
        async () => {
          const counts = await vhost.counts('orders.dlq')
          return counts?.ready === 0 && counts.unacked === 0
        },
        10_000,
        'acked once kept',
      )
      expect(errors.map((e) => (e as Error).message)).toEqual([
        'database is down',
        'database is down',
      ])
      expect((await archive.find({ id: 'store-down-1' })).messages).toHaveLength(1)
    } finally {
      await collector.close()
    }
  })
})
