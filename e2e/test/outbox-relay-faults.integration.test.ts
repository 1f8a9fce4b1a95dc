import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Kysely } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  InMemoryOutboxStore,
  OutboxRecord,
  Topology,
  type AceMq,
  type OutboxStore,
} from '@acemq/core'
import { type OutgoingMessage, type TransportPublishOptions } from '@acemq/core/spi'
import { KyselyOutboxStore, outboxMigration } from '@acemq/store-kysely'
import { SqliteOutboxStore } from '@acemq/store-sqlite'
import { connect } from '@acemq/transport-amqp'
import {
  eventually,
  requireMysql,
  requirePostgres,
  requireRabbit,
  uniqueName,
} from '@acemq/testing'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import {
  LOCK_WAIT_TIMEOUT,
  holdBrokerFaultLock,
  type HeldLock,
} from '../../test-support/broker-faults.js'
import { BrokerVhost } from '../../test-support/broker-vhost.js'
// The store-kysely tests' connections (their drivers: pg, mysql2, better-sqlite3).
import {
  mysql,
  postgres,
  sqlite,
  uniqueTable,
  type AppDatabase,
} from '../../packages/store-kysely/test/support/databases.js'

const ready = (await requireRabbit()) && (await requirePostgres()) && (await requireMysql())

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** One outbox table, and stores on it as separate processes would have them. */
interface OutboxDatabase {
  /** A store with a connection of its own. */
  store(): OutboxStore
  /** Adds records in the application's own transactions. */
  add(records: readonly OutboxRecord[]): Promise<void>
  cleanup(): Promise<void>
}

type Opener = () => Promise<OutboxDatabase>

function kyselyDatabase(open: () => Kysely<AppDatabase>, dispose?: () => void): Opener {
  return async () => {
    const table = uniqueTable('acemq_outbox_faults')
    const app = open()
    await outboxMigration({ table }).up(app)
    const appStore = new KyselyOutboxStore(app, { table })
    const pools: Kysely<AppDatabase>[] = []
    return {
      store() {
        const db = open()
        pools.push(db)
        return new KyselyOutboxStore(db, { table })
      },
      async add(records) {
        for (const record of records) {
          await app.transaction().execute((trx) => appStore.add(trx, record))
        }
      },
      async cleanup() {
        for (const pool of pools) await pool.destroy()
        await outboxMigration({ table }).down(app)
        await app.destroy()
        dispose?.()
      },
    }
  }
}

function temporaryFile(): { path: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'acemq-outbox-faults-'))
  return {
    path: join(dir, 'outbox.db'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}

const DATABASES: readonly (readonly [string, Opener])[] = [
  ['Postgres (Kysely)', kyselyDatabase(() => postgres({ max: 4 }))],
  ['MariaDB (Kysely)', kyselyDatabase(() => mysql({ max: 4 }))],
  [
    'SQLite (Kysely)',
    (() => {
      let file: { path: string; remove: () => void } | undefined
      return async () => {
        file = temporaryFile()
        const path = file.path
        return kyselyDatabase(() => sqlite(path), file.remove)()
      }
    })(),
  ],
  [
    'SQLite (store-sqlite)',
    async () => {
      // The application writes through Kysely (the same table), the relays read through
      // store-sqlite, each on a connection of its own to the file.
      const file = temporaryFile()
      const app = sqlite(file.path)
      const appStore = new KyselyOutboxStore(app)
      await outboxMigration().up(app)
      const stores: SqliteOutboxStore[] = []
      return {
        store() {
          const store = new SqliteOutboxStore(file.path)
          stores.push(store)
          return store
        },
        async add(records) {
          for (const record of records) {
            await app.transaction().execute((trx) => appStore.add(trx, record))
          }
        },
        async cleanup() {
          for (const store of stores) await store.close()
          await app.destroy()
          file.remove()
        },
      }
    },
  ],
]

/** Holds every publish of `mq` while the gate is shut, as a memory alarm holds a connection's. */
function holdPublishes(mq: AceMq): { open: () => void } {
  const transport = mq.transport
  const publish = transport.publish.bind(transport)
  let open: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (open = resolve))
  let shut = true
  transport.publish = (message: OutgoingMessage, options?: TransportPublishOptions) =>
    shut ? gate.then(() => publish(message, options)) : publish(message, options)
  return {
    open: () => {
      shut = false
      open()
    },
  }
}

function records(
  count: number,
  exchange: string,
  routingKey: string,
  prefix: string,
): OutboxRecord[] {
  return Array.from({ length: count }, (_, i) =>
    OutboxRecord.of(exchange, routingKey, { i }, { id: `${prefix}-${i}` }),
  )
}

describe.runIf(ready)('the outbox relay on RabbitMQ and real databases, under faults', () => {
  let vhost: BrokerVhost
  let lock: HeldLock | undefined
  const connections: AceMq[] = []
  const reports: string[] = []

  beforeAll(async () => {
    // Application publishes are refused on a blocked connection: keep broker alarms out.
    lock = await holdBrokerFaultLock()
    vhost = await BrokerVhost.create('acemq-outbox-faults')
  }, LOCK_WAIT_TIMEOUT + 30_000)

  afterAll(async () => {
    for (const mq of connections) await mq.close({ drainTimeout: 0 })
    await vhost?.delete()
    await lock?.release()
  })

  async function open(name: string): Promise<AceMq> {
    const mq = await connect(vhost.url, {
      connectionName: `outbox-faults-${name}`,
      onError: (error, context) => reports.push(`${name}: ${context}: ${String(error)}`),
    })
    connections.push(mq)
    return mq
  }

  for (const [name, opener] of DATABASES) {
    it(`${name}: two relays, a 1 s lease, one relay's publishes held 4 s — no record is published twice (issue 27 item 7)`, async () => {
      const database = await opener()
      try {
        const queue = uniqueName('outbox.held')
        const a = await open(`held-a-${name}`)
        const b = await open(`held-b-${name}`)
        await a.applyTopology(Topology.define().queue(queue))
        await database.add(records(200, '', queue, uniqueName('held')))
        const hold = holdPublishes(a)
        const first = a.outbox(database.store(), { batch: 200, lease: 1_000 })
        const draining = first.drainOnce()
        await sleep(300)
        const second = b.outbox(database.store(), {
          batch: 200,
          lease: 1_000,
          poll: 50,
          name: 'outbox:b',
        })
        second.start()
        // Four leases long: without renewal the second relay takes the held batch after 1 s.
        await sleep(4_000)
        hold.open()
        expect(await draining).toBe(200)
        await second.stop()
        const admin = await AmqpAdmin.open(vhost.url)
        try {
          await eventually(async () => (await admin.count(queue)) === 200, 10_000, '200 copies')
          await sleep(500)
          expect(await admin.count(queue)).toBe(200)
        } finally {
          await admin.close()
        }
        expect(second.published).toBe(0)
        expect(first.published).toBe(200)
      } finally {
        await database.cleanup()
      }
    }, 60_000)
  }

  it('MariaDB: two relays while the application writes — no deadlock, no record published twice (issue 27 item 8)', async () => {
    const database = await kyselyDatabase(() => mysql({ max: 4 }))()
    try {
      const queue = uniqueName('outbox.mariadb')
      const a = await open('mariadb-a')
      const b = await open('mariadb-b')
      await a.applyTopology(Topology.define().queue(queue))
      const relays = [
        a.outbox(database.store(), { batch: 50, poll: 10, name: 'outbox:mariadb-a' }),
        b.outbox(database.store(), { batch: 50, poll: 10, name: 'outbox:mariadb-b' }),
      ]
      const before = reports.length
      const started = Date.now()
      for (const relay of relays) relay.start()
      const WRITERS = 8
      const EACH = 250
      const prefix = uniqueName('maria')
      await Promise.all(
        Array.from({ length: WRITERS }, (_, w) =>
          database.add(records(EACH, '', queue, `${prefix}-${w}`)),
        ),
      )
      const total = WRITERS * EACH
      await eventually(
        () => relays.reduce((sum, relay) => sum + relay.published, 0) >= total,
        90_000,
        'every record published',
      )
      const elapsed = Date.now() - started
      for (const relay of relays) await relay.stop()
      const admin = await AmqpAdmin.open(vhost.url)
      let copies: number | undefined
      try {
        await sleep(500)
        copies = await admin.count(queue)
      } finally {
        await admin.close()
      }
      const trouble = reports.slice(before)
      const deadlocks = trouble.filter((line) => /deadlock/i.test(line)).length
      console.log(
        `MariaDB, two relays and ${WRITERS} writers: ${JSON.stringify({
          records: total,
          copies,
          deadlocks,
          reports: trouble.length,
          elapsedMs: elapsed,
          published: relays.map((relay) => relay.published),
        })}`,
      )
      for (const line of trouble) console.log(line)
      expect(deadlocks).toBe(0)
      expect(copies).toBe(total)
      expect(relays.reduce((sum, relay) => sum + relay.published, 0)).toBe(total)
    } finally {
      await database.cleanup()
    }
  }, 120_000)

  it('a deleted exchange charges only its own record, not the 99 published beside it (issue 27 item 9)', async () => {
    const mq = await open('deleted-exchange')
    const queue = uniqueName('outbox.survivors')
    const exchange = uniqueName('outbox.doomed')
    await mq.applyTopology(
      Topology.define().queue(queue).exchange(exchange, 'fanout').bind(queue, exchange, ''),
    )
    const store = new InMemoryOutboxStore({ maxAttempts: 1 })
    const relay = mq.outbox(store, { batch: 100, retryDelay: 0 })
    // The transport has published to the exchange: it knows it, and checks it no more.
    await store.add(OutboxRecord.of(exchange, '', { first: true }, { id: 'known' }))
    expect(await relay.drainOnce()).toBe(1)
    const admin = await AmqpAdmin.open(vhost.url)
    try {
      await admin.channel.deleteExchange(exchange)
      const batch = records(99, '', queue, uniqueName('survivor'))
      batch.splice(50, 0, OutboxRecord.of(exchange, '', { doomed: true }, { id: 'doomed' }))
      for (const record of batch) await store.add(record)
      expect(await relay.drainOnce()).toBe(99)
      expect(relay.failed).toBe(1)
      expect((await store.retired()).map((record) => record.id)).toEqual(['doomed'])
      expect((await store.retired())[0]?.lastError).toMatch(/exchange/)
      // Every survivor arrived; those the broker had taken before the channel closed arrived
      // twice (their confirms were lost with the channel, as before: a consumer's idempotency
      // store catches the copy), and none was charged.
      await eventually(async () => ((await admin.count(queue)) ?? 0) >= 100, 10_000, 'survivors')
      await sleep(500)
      const seen = new Map<string, number>()
      for (let message = await admin.get(queue); message; message = await admin.get(queue)) {
        const id = String(message.properties.messageId)
        seen.set(id, (seen.get(id) ?? 0) + 1)
      }
      const copies = [...seen.values()].reduce((sum, n) => sum + n, 0)
      console.log(
        `a deleted exchange beside 99 records: ${JSON.stringify({ published: 99, charged: 1, copies, twice: copies - 100 })}`,
      )
      expect([...seen.keys()].sort()).toEqual(
        ['known', ...batch.map((r) => r.id).filter((id) => id !== 'doomed')].sort(),
      )
    } finally {
      await admin.close()
    }
  }, 60_000)
})
