import { once } from 'node:events'
import { inspect } from 'node:util'
import amqplib from 'amqplib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  AceMqError,
  ConfigurationError,
  ConsumerOptions,
  RetryPolicy,
  Topology,
  toHealthJson,
  type AceMq,
} from '@acemq/core'
import { KyselyIdempotencyStore, createTableSql, idempotencyMigration } from '@acemq/store-kysely'
import { SqliteIdempotencyStore } from '@acemq/store-sqlite'
import { connect } from '@acemq/transport-amqp'
import { sql } from 'kysely'
import { AmqpAdmin } from '../../test-support/amqp-admin.js'
import { rabbitmqctl } from '../../test-support/broker-faults.js'
import { AMQP_URL, requirePostgres, requireRabbit, uniqueName } from '@acemq/testing'
import { printAccounting } from './accounting.js'
import { badMessages, type Outcome } from './bad-input.js'
import { effectsDatabase, startProgram, type Child, type EffectsDatabase } from './support.js'

const ready = (await requireRabbit()) && (await requirePostgres())

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

async function poll(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: () => string,
  intervalMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (Date.now() > deadline) throw new Error(`${what()} (after ${timeoutMs} ms)`)
    await sleep(intervalMs)
  }
}

/** Ready messages in `queue` (0 when it does not exist). */
async function readyCount(channel: amqplib.Channel, queue: string): Promise<number> {
  return (await channel.checkQueue(queue)).messageCount
}

/** Takes every message off `queue` (acked), keyed by its `x-test-seq` header. */
async function drain(
  connection: amqplib.ChannelModel,
  queue: string,
  count: number,
): Promise<Map<number, { reason: unknown; copies: number }>> {
  const channel = await connection.createChannel()
  const taken = new Map<number, { reason: unknown; copies: number }>()
  let received = 0
  const done = new Promise<void>((resolve) => {
    if (count === 0) resolve()
    void channel.prefetch(500)
    void channel.consume(queue, (message) => {
      if (message === null) return
      const headers = message.properties.headers ?? {}
      const seq = Number(headers['x-test-seq'])
      const previous = taken.get(seq)
      taken.set(seq, { reason: headers['x-acemq-error'], copies: (previous?.copies ?? 0) + 1 })
      channel.ack(message)
      if (++received === count) resolve()
    })
  })
  await Promise.race([
    done,
    sleep(60_000).then(() => {
      throw new Error(`only ${received} of ${count} messages came off ${queue}`)
    }),
  ])
  await channel.close()
  return taken
}

describe.runIf(ready)('10,000 raw deliveries of bad input', () => {
  const COUNT = 10_000
  const POLICY = RetryPolicy.fixed(3, 10).giveUpAfter('1h')
  const queue = uniqueName('e2e.bad-input')
  let database: EffectsDatabase
  let admin: AmqpAdmin
  let worker: Child | undefined

  beforeAll(async () => {
    database = await effectsDatabase((table) => createTableSql({ table, dialect: 'postgres' }))
    admin = await AmqpAdmin.open()
    const mq = await connect(AMQP_URL)
    await mq.applyTopology(Topology.define().queueWithRetry(queue, POLICY))
    await mq.close()
  })

  afterAll(async () => {
    if (worker !== undefined && worker.process.exitCode === null) worker.process.kill('SIGKILL')
    await worker?.exited
    await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
    await database.drop()
  })

  it('keeps the consumer process up and ends every message handled, parked or dead-lettered with a reason, the counts adding up exactly', async () => {
    const consumer = startProgram('bad-input-worker', {
      QUEUE: queue,
      IDEMPOTENCY_TABLE: database.idempotencyTable,
      EFFECTS_TABLE: database.effectsTable,
    })
    worker = consumer
    await consumer.waitFor(/^READY$/, 30_000)

    const messages = badMessages(COUNT)
    const started = Date.now()
    const connection = await amqplib.connect(AMQP_URL)
    try {
      const channel = await connection.createConfirmChannel()
      for (const message of messages) {
        if (!channel.sendToQueue(queue, message.body, message.options)) {
          await once(channel, 'drain')
        }
        if (message.seq % 500 === 0) await channel.waitForConfirms()
      }
      await channel.waitForConfirms()
      const published = Date.now() - started

      const counts = async (): Promise<{ handled: number; parked: number; dlq: number }> => {
        const { rows } = await sql<{
          n: string
        }>`select count(*) as n from ${sql.table(database.effectsTable)}`.execute(database.db)
        return {
          handled: Number(rows[0]?.n ?? 0),
          parked: await readyCount(channel, `${queue}.parked`),
          dlq: await readyCount(channel, `${queue}.dlq`),
        }
      }
      let last = { handled: 0, parked: 0, dlq: 0 }
      await poll(
        async () => {
          last = await counts()
          return last.handled + last.parked + last.dlq >= COUNT
        },
        150_000,
        () =>
          `handled ${last.handled} + parked ${last.parked} + dead-lettered ${last.dlq} never reached ${COUNT}; the consumer reported ${consumer.lines
            .filter((l) => !l.startsWith('['))
            .slice(-5)
            .join(' | ')}`,
      )
      await poll(
        async () => (await readyCount(channel, queue)) === 0,
        30_000,
        () => `the queue ${queue} never emptied`,
      )
      // Anything still moving (a duplicate, a late retry) would show now.
      await sleep(1_000)
      const settled = await counts()
      const processed = Date.now() - started

      expect(consumer.process.exitCode).toBeNull()
      const reported = await (async () => {
        const from = consumer.lines.length
        consumer.send('stats')
        const line = await consumer.waitFor(/^STATS /, 10_000, from)
        return JSON.parse(line.slice('STATS '.length)) as Record<string, number>
      })()
      consumer.process.kill('SIGTERM')
      expect(await consumer.exited).toBe(0)

      const parked = await drain(connection, `${queue}.parked`, settled.parked)
      const deadLettered = await drain(connection, `${queue}.dlq`, settled.dlq)
      const effects = await database.effects()

      const actual = new Map<number, Outcome[]>()
      const add = (seq: number, outcome: Outcome, times: number): void => {
        const list = actual.get(seq) ?? []
        for (let i = 0; i < times; i++) list.push(outcome)
        actual.set(seq, list)
      }
      for (const [seq, workers] of effects) add(Number(seq), 'handled', workers.length)
      for (const [seq, { copies }] of parked) add(seq, 'parked', copies)
      for (const [seq, { copies }] of deadLettered) add(seq, 'dead-lettered', copies)

      const wrong: string[] = []
      const badReasons: string[] = []
      const table = new Map<string, Record<Outcome, number>>()
      for (const message of messages) {
        const outcomes = actual.get(message.seq) ?? []
        if (outcomes.length !== 1 || outcomes[0] !== message.expected) {
          wrong.push(
            `#${message.seq} (${message.bodyKind}, ${message.contentType}, headers ${inspect(message.options.headers, { depth: 1, breakLength: Infinity })}): expected ${message.expected}, got ${outcomes.join(' + ') || 'nothing'}`,
          )
        }
        const copy = parked.get(message.seq) ?? deadLettered.get(message.seq)
        if (copy !== undefined && message.reason !== undefined) {
          if (typeof copy.reason !== 'string' || !message.reason.test(copy.reason)) {
            badReasons.push(
              `#${message.seq}: ${inspect(copy.reason)} does not match ${message.reason}`,
            )
          }
        }
        const row = table.get(message.bodyKind) ?? { handled: 0, parked: 0, 'dead-lettered': 0 }
        row[message.expected]++
        table.set(message.bodyKind, row)
      }
      // Handled messages got an id of their own, whatever the x-acemq-id header held.
      const ids = [...effects.values()].flat()
      const badIds = ids.filter((id) => id === '' || /\[object |^undefined$|^null$/.test(id))

      const reasons = new Map<string, number>()
      for (const { reason } of [...parked.values(), ...deadLettered.values()]) {
        const key = String(reason)
          .replace(/\d+/g, 'N')
          .replace(/(could not decode: [^:(]*).*/, '$1')
          .slice(0, 60)
        reasons.set(key, (reasons.get(key) ?? 0) + 1)
      }

      printAccounting(
        `bad input: ${COUNT} raw deliveries, published in ${published} ms, all settled in ${processed} ms`,
        [
          ['published', messages.length],
          ['handled', settled.handled],
          ['parked', settled.parked],
          ['dead-lettered', settled.dlq],
          ['handled + parked + dead-lettered', settled.handled + settled.parked + settled.dlq],
          ['left on the queue', await readyCount(channel, queue)],
          ['outcome other than expected', wrong.length],
          ['copies without the expected reason', badReasons.length],
          ['distinct ids of handled messages', new Set(ids).size],
          ...[...table].map(
            ([kind, row]) =>
              [
                `  ${kind}: handled/parked/dead-lettered`,
                `${row.handled}/${row.parked}/${row['dead-lettered']}`,
              ] as [string, string],
          ),
          ['reasons', ''],
          ...[...reasons]
            .sort((a, b) => b[1] - a[1])
            .map(([reason, n]) => [`  ${reason}`, n] as [string, number]),
          ['failures the consumer reported', ''],
          ...Object.entries(reported).map(([kind, n]) => [`  ${kind}`, n] as [string, number]),
        ],
      )

      expect(settled.handled + settled.parked + settled.dlq).toBe(COUNT)
      expect(wrong.slice(0, 10)).toEqual([])
      expect(badReasons.slice(0, 10)).toEqual([])
      expect(badIds).toEqual([])
      expect(new Set(ids).size).toBe(ids.length)
      // Every set-aside copy was routed at the first try: no move failed and went back.
      expect(Object.keys(reported).filter((kind) => kind.startsWith('could not move'))).toEqual([])
    } finally {
      await connection.close().catch(() => undefined)
    }
  }, 240_000)
})

describe.runIf(ready)('messages the engine must set aside, not spin forever', () => {
  // Each of these ends in a loop today: the message is handed back to the queue after every
  // failed attempt to set it aside (or to claim it), never parked or dead-lettered. The tests
  // wait a few rounds for the copy that should have been written, then delete the queue.
  let mq: AceMq
  let admin: AmqpAdmin
  const queues: string[] = []
  const reported: string[] = []

  beforeAll(async () => {
    mq = await connect(AMQP_URL, {
      onError: (error, context) =>
        reported.push(
          `${context}: ${String(error)}`
            // A 300-character id would fill the line.
            .replace(/([a-z])\1{19,}/g, (run, c: string) => `${c}…(${run.length} times)`)
            .replace(/[a-z]{200,}/g, (run) => `${run.slice(0, 8)}…(${run.length} letters)`)
            .slice(0, 400),
        ),
    })
    admin = await AmqpAdmin.open()
  })

  afterAll(async () => {
    await mq.close({ drainTimeout: 0 })
    for (const queue of queues) await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    await admin.close()
  })

  async function setAsideWithin(
    options: ConsumerOptions,
    raw: readonly { body: Buffer; options: amqplib.Options.Publish }[],
    waitMs = 6_000,
  ): Promise<{ parked: number; dlq: number; handled: number; evidence: string }> {
    const queue = uniqueName('e2e.poison')
    queues.push(queue)
    await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))
    let handled = 0
    const from = reported.length
    const consumer = await mq.consume(queue, options, () => {
      handled++
    })
    for (const message of raw) await admin.sendRaw(queue, message.body, message.options)
    const deadline = Date.now() + waitMs
    let parked = 0
    let dlq = 0
    while (Date.now() < deadline && parked + dlq + handled < raw.length) {
      await sleep(100)
      parked = (await admin.count(`${queue}.parked`)) ?? 0
      dlq = (await admin.count(`${queue}.dlq`)) ?? 0
    }
    await consumer.close({ drainTimeout: 0 })
    const failures = reported.slice(from)
    const evidence = `after ${waitMs} ms: parked ${parked}, dead-lettered ${dlq}, handled ${handled}; the engine reported ${failures.length} failure(s), the first: ${failures.slice(0, 2).join(' || ')}`
    return { parked, dlq, handled, evidence }
  }

  it('parks an undecodable message whose x-acemq-id is longer than 255 bytes (AMQP message-id is a short string)', async () => {
    const result = await setAsideWithin(ConsumerOptions.defaults(), [
      { body: Buffer.from('{'), options: { headers: { 'x-acemq-id': 'x'.repeat(300) } } },
    ])
    expect(result.parked, result.evidence).toBe(1)
  }, 20_000)

  it('parks undecodable messages whose application headers amqplib reads but cannot write back (a double of 2^50 + 0.5, a timestamp of 2^64 - 1)', async () => {
    const result = await setAsideWithin(ConsumerOptions.defaults(), [
      {
        body: Buffer.from('{'),
        options: { headers: { 'x-app-ratio': { '!': 'double', value: 2 ** 50 + 0.5 } } },
      },
      {
        body: Buffer.from('{'),
        options: {
          headers: { 'x-app-expires': { '!': 'timestamp', value: '18446744073709551615' } },
        },
      },
    ])
    expect(result.parked, result.evidence).toBe(2)
  }, 20_000)

  it('sets aside a message whose id the idempotency store refuses (it contains NUL) instead of putting it back forever', async () => {
    const database = await effectsDatabase((table) => createTableSql({ table }))
    try {
      const store = new KyselyIdempotencyStore(database.db, { table: database.idempotencyTable })
      const result = await setAsideWithin(
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay(100),
        [{ body: Buffer.from('{}'), options: { headers: { 'x-acemq-id': 'order\u00001' } } }],
      )
      expect(result.handled).toBe(0)
      expect(result.parked + result.dlq, result.evidence).toBe(1)
    } finally {
      await database.drop()
    }
  }, 20_000)

  it('sets aside a message whose id is too long for the store (a 3,000-byte id over the btree limit) instead of putting it back forever', async () => {
    const database = await effectsDatabase((table) => createTableSql({ table }))
    try {
      const store = new KyselyIdempotencyStore(database.db, { table: database.idempotencyTable })
      // Random text, so that Postgres cannot compress the key under its index-row limit.
      const id = Array.from({ length: 3_000 }, () =>
        String.fromCharCode(97 + Math.floor(Math.random() * 26)),
      ).join('')
      const result = await setAsideWithin(
        ConsumerOptions.defaults().idempotent(store).withInProgressDelay(100),
        [{ body: Buffer.from('{}'), options: { headers: { 'x-acemq-id': id } } }],
      )
      expect(result.parked + result.dlq + result.handled, result.evidence).toBe(1)
    } finally {
      await database.drop()
    }
  }, 20_000)
})

describe.runIf(ready)('table names and URLs with injection attempts, and passwords', () => {
  const HOSTILE_TABLES = [
    'x; drop table y',
    'a"b',
    "a'b",
    'acemq_idempotency; --',
    'acemq_idempotency /* comment */',
    'public.a.b',
    'a b',
    '',
    '1abc',
    'a'.repeat(64),
    'tbl\u0000',
    'a`b',
    'a-b',
    '"quoted"',
    'schema."t"',
    "robert'); drop table students;--",
  ]
  let database: EffectsDatabase
  const canary = uniqueName('e2e_canary').replace('.', '_')

  beforeAll(async () => {
    database = await effectsDatabase((table) => createTableSql({ table }))
    await sql`create table ${sql.table(canary)} (id int)`.execute(database.db)
  })

  afterAll(async () => {
    await sql`drop table if exists ${sql.table(canary)}`.execute(database.db)
    await database.drop()
  })

  it('KyselyIdempotencyStore, createTableSql and idempotencyMigration refuse every table name that is not a plain identifier, naming the option and the value, and run no SQL', async () => {
    for (const table of [...HOSTILE_TABLES, `x; drop table ${canary}`]) {
      const clear = new RegExp(
        `table must be an SQL identifier.*got ${JSON.stringify(table).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`,
      )
      expect(() => new KyselyIdempotencyStore(database.db, { table }), table).toThrow(
        ConfigurationError,
      )
      expect(() => new KyselyIdempotencyStore(database.db, { table }), table).toThrow(clear)
      expect(() => createTableSql({ table }), table).toThrow(clear)
      expect(() => idempotencyMigration({ table }), table).toThrow(clear)
    }
    const { rows } = await sql<{
      n: string
    }>`select count(*) as n from pg_tables where tablename = ${canary}`.execute(database.db)
    expect(rows[0]?.n).toBe('1')
  })

  it('SqliteIdempotencyStore refuses the same table names', () => {
    for (const table of HOSTILE_TABLES) {
      expect(() => new SqliteIdempotencyStore(':memory:', { table }), table).toThrow(
        ConfigurationError,
      )
      expect(() => SqliteIdempotencyStore.createTableSql({ table }), table).toThrow(
        /table must be an SQL identifier/,
      )
    }
  })

  /** Everything a user could print of an error: message, stack, causes, properties. */
  function everything(error: unknown): string {
    return `${String(error)}\n${inspect(error, { depth: 10 })}\n${(error as Error)?.stack ?? ''}`
  }

  function expectNoSecret(text: string, password: string): void {
    expect(text).not.toContain(password)
    expect(text).not.toContain(encodeURIComponent(password))
  }

  it('refuses a malformed or non-AMQP connect() URL with a clear error that never shows the password', async () => {
    const password = `S3cr3t-pw'; drop table users; --`
    for (const url of [
      `http://guest:${encodeURIComponent(password)}@127.0.0.1:5672`,
      `amqp://guest:${password}@[::1`,
      `amqp://guest:${password}@127.0.0.1:notaport`,
    ]) {
      const error = await connect(url).catch((e: unknown) => e)
      expect(error, url).toBeInstanceOf(ConfigurationError)
      expect((error as Error).message, url).toMatch(/url must (be an|use the) amqp/)
      expectNoSecret(everything(error), password)
    }
  })

  it('never shows the password when connecting to a wrong port or with a wrong password', async () => {
    const password = 'S3cr3t-pw'
    for (const url of [
      `amqp://guest:${password}@127.0.0.1:1`,
      `amqp://guest:${password}@127.0.0.1:5672`,
      `amqp://guest:${encodeURIComponent(`${password}/@:x`)}@127.0.0.1:5672`,
    ]) {
      const error = await connect(url, { connectTimeout: 5_000 }).catch((e: unknown) => e)
      expect(error, url).toBeInstanceOf(AceMqError)
      expect((error as AceMqError).code, url).toBe('ACEMQ_CONNECTION_FAILED')
      expectNoSecret(everything(error), password)
      expectNoSecret(everything(error), `${password}/@:x`)
    }
  })

  it('never shows the password in the health output of a live connection', async () => {
    const user = uniqueName('acemq-e2e').replace('.', '-')
    const password = 'S3cr3t-pw/@:x'
    await rabbitmqctl('add_user', user, password)
    try {
      await rabbitmqctl('set_permissions', '-p', '/', user, '.*', '.*', '.*')
      const mq = await connect(`amqp://${user}:${encodeURIComponent(password)}@127.0.0.1:5672`)
      try {
        const health = await mq.health()
        expect(health.status).toBe('UP')
        const shown = [
          JSON.stringify(toHealthJson(health)),
          mq.transport.description,
          inspect(mq, { depth: 5 }),
          inspect(mq.transport, { depth: 5 }),
        ].join('\n')
        expect(shown).toContain(user)
        expectNoSecret(shown, password)
        expectNoSecret(shown, 'S3cr3t-pw')
      } finally {
        await mq.close()
      }
    } finally {
      await rabbitmqctl('delete_user', user).catch(() => undefined)
    }
  })
})
