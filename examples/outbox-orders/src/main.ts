// An order service with the transactional outbox. Each order and the message announcing it
// are written in ONE database transaction; a relay publishes the messages (confirmed,
// mandatory) and marks them published; an idempotent consumer handles each order once, even
// when the relay publishes one again after a crash between the confirm and the mark.
import {
  ConsumerOptions,
  OutboxRecord,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
} from '@acemq/core'
import {
  KyselyIdempotencyStore,
  KyselyOutboxStore,
  idempotencyMigration,
  outboxMigration,
} from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import amqplib from 'amqplib'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'

interface Database {
  orders: { id: string; total: number }
}

const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const count = Number(process.env.ORDERS ?? 10)
const name = process.env.NAME ?? 'outbox_orders'
const queue = `${name}.placed`

const db = new Kysely<Database>({
  dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl }) }),
})
// In a real service these are migrations; here they run at start and are dropped at the end.
await outboxMigration({ table: `${name}_outbox` }).up(db)
await idempotencyMigration({ table: `${name}_seen` }).up(db)
await sql`create table if not exists ${sql.table(`${name}_orders`)} (id text primary key, total integer not null)`.execute(
  db,
)

await using mq = await connect(amqpUrl)
await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))

// The order service: the order row and its outbox record commit (or roll back) together.
const outbox = new KyselyOutboxStore(db, { table: `${name}_outbox` })
for (let i = 1; i <= count; i++) {
  const order = { id: `order-${i}`, total: i * 10 }
  await db.transaction().execute(async (trx) => {
    await sql`insert into ${sql.table(`${name}_orders`)} (id, total) values (${order.id}, ${order.total})`.execute(
      trx,
    )
    await outbox.add(trx, OutboxRecord.of('', queue, order, { id: order.id }))
  })
}
console.log(`placed ${count} orders`)

// The consumer: the record's id is the message id, so the idempotency store catches a copy.
const handled = new Set<string>()
let allHandled: () => void = () => undefined
const done = new Promise<void>((resolve) => (allHandled = resolve))
await mq.consume<{ id: string; total: number }>(
  queue,
  ConsumerOptions.defaults().idempotent(new KyselyIdempotencyStore(db, { table: `${name}_seen` })),
  (message) => {
    handled.add(message.payload.id)
    console.log(`handled ${message.payload.id} (${message.payload.total})`)
    if (handled.size === count) allHandled()
  },
)

// The relay: leased batches, confirmed publishes, marks after the confirm. close() stops it.
const relay = mq.outbox(outbox, { batch: 100, poll: '200ms', lease: '30s' })
relay.start()
await done

const outboxHealth = (await mq.health()).reports.find((r) => r.name === 'outbox')
console.log(
  `relay published ${relay.published}; outbox ${outboxHealth?.status} with ${outboxHealth?.details['pending']} pending`,
)

await mq.close()
await outboxMigration({ table: `${name}_outbox` }).down(db)
await idempotencyMigration({ table: `${name}_seen` }).down(db)
await sql`drop table if exists ${sql.table(`${name}_orders`)}`.execute(db)
await db.destroy()
// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its queues.
const admin = await amqplib.connect(amqpUrl)
const channel = await admin.createChannel()
for (const leftover of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
  await channel.deleteQueue(leftover)
}
await admin.close()
console.log(`removed ${queue} and its .dlq and .parked`)
console.log('done')
