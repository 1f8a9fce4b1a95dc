import { ConsumerOptions, OutboxRecord, RetryPolicy, Topology, type AceMq } from '@acemq/core'
import {
  KyselyIdempotencyStore,
  KyselyOutboxStore,
  createOutboxTableSql,
  createTableSql,
} from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { DATABASE_URL, uniqueName } from '@acemq/testing'
import {
  effectsDatabase,
  startProgram,
  survivePostgresRestarts,
  type Child,
  type EffectsDatabase,
} from './support.js'

/** What the order service, the relay and the consumers did, counted. */
export interface OutboxFigures {
  /** Orders committed, each with its outbox record in the same transaction. */
  readonly orders: number
  /** Messages the broker delivered to the audit queue (every publish, duplicates included). */
  readonly delivered: number
  /** Orders the idempotent consumer handled (its side effect happened), distinct. */
  readonly handled: number
  /** Orders whose side effect happened more than once. */
  readonly handledTwice: number
  /** Copies published more than once (caught by the consumer's idempotency store). */
  readonly duplicates: number
  /** Committed orders never handled. */
  readonly lost: number
}

/**
 * The order service of the end-to-end outbox tests on the real services: Postgres tables
 * `orders` and an outbox, a fanout exchange with two queues — one handled by an idempotent
 * consumer whose side effect is a row per run, one (audit) counting every copy delivered —
 * and relays started as processes of their own.
 */
export class OutboxWorld {
  readonly exchange = uniqueName('e2e.orders')
  readonly handledQueue = `${this.exchange}.handled`
  readonly auditQueue = `${this.exchange}.audit`
  readonly ordersTable = uniqueName('e2e_orders').replace('.', '_')
  readonly outboxTable = uniqueName('e2e_outbox').replace('.', '_')
  readonly deliveries = new Map<string, number>()
  readonly relays: Child[] = []
  readonly outbox: KyselyOutboxStore
  /** The service's own pool, for orders, the outbox and the consumer's claims and effects. */
  readonly db: Kysely<Record<string, never>>
  #placed = 0

  private constructor(
    readonly url: string,
    readonly database: EffectsDatabase,
    readonly mq: AceMq,
  ) {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 12 })
    survivePostgresRestarts(pool)
    this.db = new Kysely({ dialect: new PostgresDialect({ pool }) })
    this.outbox = new KyselyOutboxStore(this.db, { table: this.outboxTable })
  }

  static async create(url: string): Promise<OutboxWorld> {
    const database = await effectsDatabase((table) =>
      createTableSql({ table, dialect: 'postgres' }),
    )
    const mq = await connect(url, {
      connectionName: 'e2e-outbox-consumers',
      recovery: { initialDelay: 100, maxDelay: 1_000 },
    })
    const world = new OutboxWorld(url, database, mq)
    await sql.raw(createOutboxTableSql({ table: world.outboxTable })).execute(database.db)
    await sql`create table ${sql.table(world.ordersTable)} (id text primary key, total integer not null)`.execute(
      database.db,
    )
    await mq.applyTopology(
      Topology.define()
        .exchange(world.exchange, 'fanout')
        .queueWithDeadLetter(world.handledQueue)
        .queue(world.auditQueue)
        .bind(world.handledQueue, world.exchange, '')
        .bind(world.auditQueue, world.exchange, ''),
    )
    const store = new KyselyIdempotencyStore(world.db, { table: database.idempotencyTable })
    await mq.consume<{ id: string }>(
      world.handledQueue,
      ConsumerOptions.defaults()
        .idempotent(store)
        .withRetry(RetryPolicy.fixed(1_000, 100))
        .withInProgressDelay(100)
        .withPrefetch(50)
        .withConcurrency(8),
      async (message) => {
        await sql`insert into ${sql.table(database.effectsTable)} (message_id, worker) values (${message.envelope.id}, ${'consumer'})`.execute(
          world.db,
        )
      },
    )
    await mq.consume(world.auditQueue, ConsumerOptions.defaults().withPrefetch(200), (message) => {
      world.deliveries.set(
        message.envelope.id,
        (world.deliveries.get(message.envelope.id) ?? 0) + 1,
      )
    })
    return world
  }

  /** Places `count` more orders, one transaction each: the order row and its outbox record. */
  async placeOrders(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const id = `order-${this.#placed}`
      // The order service retries its own transaction while the database is away.
      for (;;) {
        try {
          await this.db.transaction().execute(async (trx) => {
            await sql`insert into ${sql.table(this.ordersTable)} (id, total) values (${id}, ${i + 1})`.execute(
              trx,
            )
            await this.outbox.add(
              trx,
              OutboxRecord.of(this.exchange, '', { id, total: i + 1 }, { id }),
            )
          })
          break
        } catch {
          if (await this.#committed(id)) break
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      }
      this.#placed++
    }
  }

  /** Whether order `id` is in the table (a commit whose answer was lost with the connection). */
  async #committed(id: string): Promise<boolean> {
    try {
      const { rows } =
        await sql`select 1 from ${sql.table(this.ordersTable)} where id = ${id}`.execute(
          this.database.db,
        )
      return rows.length > 0
    } catch {
      return false
    }
  }

  /** Starts a relay process on the outbox table. */
  startRelay(name: string, env: Record<string, string> = {}): Child {
    const relay = startProgram('outbox-relay', {
      AMQP_URL: this.url,
      OUTBOX_TABLE: this.outboxTable,
      RELAY_NAME: name,
      ...env,
    })
    this.relays.push(relay)
    return relay
  }

  /** The ids of the outbox records not (yet) marked published. */
  async unpublishedIds(): Promise<Set<string>> {
    const { rows } = await sql<{
      id: string
    }>`select id from ${sql.table(this.outboxTable)} where published_at is null`.execute(this.db)
    return new Set(rows.map((row) => row.id))
  }

  /** Orders handled so far (distinct), in one cheap query. */
  async handledCount(): Promise<number> {
    try {
      const { rows } = await sql<{
        n: string
      }>`select count(distinct message_id) as n from ${sql.table(this.database.effectsTable)}`.execute(
        this.db,
      )
      return Number(rows[0]?.n ?? 0)
    } catch {
      return -1
    }
  }

  /** The figures now. */
  async figures(): Promise<OutboxFigures> {
    const { rows } = await sql<{
      n: string
    }>`select count(*) as n from ${sql.table(this.ordersTable)}`.execute(this.db)
    const orders = Number(rows[0]?.n ?? 0)
    const effects = await this.database.effects()
    let delivered = 0
    let duplicates = 0
    for (const count of this.deliveries.values()) {
      delivered += count
      duplicates += count - 1
    }
    const handledTwice = [...effects.values()].filter((runs) => runs.length > 1).length
    const { rows: ids } = await sql<{
      id: string
    }>`select id from ${sql.table(this.ordersTable)}`.execute(this.db)
    const lost = ids.filter((row) => !effects.has(row.id)).length
    return { orders, delivered, handled: effects.size, handledTwice, duplicates, lost }
  }

  async close(): Promise<void> {
    for (const relay of this.relays) {
      if (relay.process.exitCode === null && relay.process.signalCode === null)
        relay.process.kill('SIGKILL')
      await relay.exited
    }
    await this.mq.close({ drainTimeout: 0 })
    await sql`drop table if exists ${sql.table(this.ordersTable)}`.execute(this.db)
    await sql`drop table if exists ${sql.table(this.outboxTable)}`.execute(this.db)
    await this.db.destroy()
    await this.database.drop()
  }
}
