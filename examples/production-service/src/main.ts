import { setTimeout as sleep } from 'node:timers/promises'
import amqplib from 'amqplib'
import Fastify from 'fastify'
import { sql, type Kysely } from 'kysely'
import {
  ConsumerOptions,
  FatalError,
  RetryPolicy,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
  shutdownOnSignals,
} from '@acemq/core'
import { describeError, rungQueueName } from '@acemq/core/spi'
import { acemqHealth } from '@acemq/health-fastify'
import { instrument } from '@acemq/otel'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { connect } from '@acemq/transport-amqp'
import { migrator, openDatabase, type Database } from './database.js'
import { startTelemetry } from './telemetry.js'

/** What the service consumes. The id is the business id, and the envelope id too. */
interface OrderPlaced {
  readonly id: string
  readonly total: number
}

const config = {
  amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  queue: process.env.QUEUE ?? 'examples.production-service',
  table: process.env.IDEMPOTENCY_TABLE ?? 'acemq_idempotency_production_example',
  port: Number(process.env.PORT ?? 0),
  keepRunning: process.env.KEEP_RUNNING === '1',
}
// 3 attempts, 200 ms then 400 ms (±20 %), then the dead-letter queue.
const policy = RetryPolicy.exponential(3, '200ms', '1s')

async function main(): Promise<void> {
  // 1. Telemetry first, so that everything after it is traced.
  const telemetry = startTelemetry()

  // 2. The database, migrated: the idempotency table is one of the service's migrations.
  const { db } = openDatabase(config.databaseUrl)
  const migrated = await migrator(db, config.table).migrateToLatest()
  if (migrated.error !== undefined) throw migrated.error
  const store = new KyselyIdempotencyStore(db, { table: config.table })
  await store.verify() // fails now, not at the first message, if the table is not there
  log(`database: idempotency table ${config.table} ready`)

  // 3. The broker: failures the engine recovers from go to the service's logger.
  const mq = await connect(config.amqpUrl, {
    connectionName: 'production-service',
    onError: (error, context) => console.warn(`acemq: ${context}: ${describeError(error)}`),
  })
  instrument(mq, {
    tracerProvider: telemetry.tracerProvider,
    meterProvider: telemetry.meterProvider,
  })
  mq.registerHealth(store.healthContributor())
  await mq.applyTopology(Topology.define().queueWithRetry(config.queue, policy))
  log(`broker: connected to ${mq.transport.description}`)

  // 4. Health over HTTP, for the orchestrator: 503 only when the connection is DOWN.
  const app = Fastify()
  await app.register(acemqHealth, { mq })
  const address = await app.listen({ port: config.port, host: '127.0.0.1' })

  // 5. Shutdown, on SIGTERM or SIGINT: drain the running handlers (up to 20 s) and close the
  //    connection, then the rest in order: the HTTP server, the store and its pg pool, and the
  //    telemetry SDK last, so that it flushes the spans of everything before it.
  shutdownOnSignals(mq, {
    timeout: '20s',
    onShutdown: async ({ signal, drained, closed }) => {
      log(`${signal}: drained=${drained} closed=${closed}`)
      await app.close()
      log('closed: http server')
      if (!config.keepRunning) await leaveNothingBehind(db)
      await store.close()
      await db.destroy()
      log('closed: idempotency store and pg pool')
      const { spanNames, consumed } = await telemetry.shutdown()
      log(`closed: telemetry (spans: ${spanNames.join(', ')}; acemq.consume.total ${consumed})`)
    },
  })

  // 6. The consumer: retries with backoff, a dead-letter queue, and each order handled once.
  const handled = new Map<string, number>()
  let settle!: () => void
  const allSettled = new Promise<void>((resolve) => (settle = resolve))
  const settled = new Set<string>()
  const done = (id: string): void => {
    settled.add(id)
    if (settled.size === 3) settle()
  }
  await mq.consume<OrderPlaced>(
    config.queue,
    ConsumerOptions.defaults().withRetry(policy).idempotent(store).withPrefetch(20),
    async (message, { signal }) => {
      const order = message.payload
      const { attempt } = message.envelope
      handled.set(order.id, (handled.get(order.id) ?? 0) + 1)
      if (order.total <= 0) {
        log(`${order.id}: refused (total ${order.total}): to ${deadLetterQueueName(config.queue)}`)
        done(order.id)
        throw new FatalError(`order ${order.id} has no total`) // never retried
      }
      if (order.id === 'o-2' && attempt === 1) {
        log(`${order.id}: attempt 1 failed (billing timed out): retried`)
        throw new Error('billing timed out') // retried after 200 ms
      }
      await sleep(10, undefined, { signal }) // the work; pass the signal to what you await
      log(`${order.id}: shipped (attempt ${attempt})`)
      done(order.id)
    },
  )

  // Publish as the order service would: the business id is the envelope id, so a resend of
  // the same order is recognised by the idempotency store and not handled twice.
  const orders = mq.publisher<OrderPlaced>('', config.queue)
  for (const order of [
    { id: 'o-1', total: 30 },
    { id: 'o-1', total: 30 }, // sent again: a retry of the order service's own
    { id: 'o-2', total: 12 },
    { id: 'o-3', total: 0 },
  ]) {
    await orders.send(order, { id: order.id }) // resolves once the broker confirmed it
  }
  await allSettled
  await waitFor(
    async () => (await mq.transport.queueLength?.(deadLetterQueueName(config.queue))) === 1,
  )
  log(`o-1: sent twice, handled ${handled.get('o-1')} time(s)`)
  log(`${deadLetterQueueName(config.queue)}: 1 message (o-3)`)

  const response = await fetch(`${address}/acemq-health`)
  const health = (await response.json()) as {
    status: string
    components: Record<string, { status: string }>
  }
  const components = Object.entries(health.components).map(([name, c]) => `${name} ${c.status}`)
  log(`GET /acemq-health → ${response.status} ${health.status} (${components.join(', ')})`)

  if (config.keepRunning) {
    log(`serving ${address}/acemq-health`)
    log(`waiting for a signal: kill -TERM ${process.pid}, or Ctrl-C`)
  } else {
    log('sending SIGTERM to itself, as a deploy would')
    process.kill(process.pid, 'SIGTERM')
  }
}

/**
 * A demo run cleans up after itself, so that it can run again with the same output: a real
 * service keeps its queues and its table.
 */
async function leaveNothingBehind(db: Kysely<Database>): Promise<void> {
  const connection = await amqplib.connect(config.amqpUrl)
  const channel = await connection.createChannel()
  const rungs = policy.brokerRungs().map((delay) => rungQueueName(config.queue, delay))
  for (const queue of [
    config.queue,
    deadLetterQueueName(config.queue),
    parkedQueueName(config.queue),
    ...rungs,
  ]) {
    await channel.deleteQueue(queue)
  }
  await connection.close()
  const down = await migrator(db, config.table).migrateDown()
  if (down.error !== undefined) throw down.error
  await sql`drop table if exists ${sql.table(`${config.table}_migration`)}, ${sql.table(`${config.table}_migration_lock`)}`.execute(
    db,
  )
  log('demo: its queues and table removed')
}

async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200 && !(await check()); i++) await sleep(25)
}

function log(line: string): void {
  console.log(line)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
