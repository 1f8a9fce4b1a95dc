import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AceMq, InMemoryTransport } from '@acemq/core'
import { type ClaimingIdempotencyStore } from '@acemq/core/spi'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { SqliteIdempotencyStore } from '@acemq/store-sqlite'
import { connect, redactUrl } from '@acemq/transport-amqp'
import { inMemoryView, rabbitView, type QueueView } from './queue-view.js'

/** Where the demo's messages travel. */
export interface Broker {
  readonly mq: AceMq
  readonly label: string
  /** Queue names start with this: unique per run on a shared broker. */
  readonly prefix: string
  readonly queues: QueueView
}

/** An idempotency store that can be closed. */
export type Store = ClaimingIdempotencyStore & { close(): Promise<void> }

/** Where the demo remembers which orders it handled. */
export interface Stores {
  readonly kind: 'sqlite' | 'postgres'
  readonly label: string
  /** The consumers' store. */
  readonly store: Store
  /** A second handle on the same table with claims of its own: another worker, as far as the store can tell. */
  readonly otherWorker: Store
  /** Closes both and removes what the demo created; answers what it removed. */
  tearDown(): Promise<string>
}

const suffix = (): string => randomBytes(3).toString('hex')

/** RabbitMQ when `AMQP_URL` is set, otherwise the in-memory transport: nothing to install. */
export async function openBroker(): Promise<Broker> {
  const url = process.env.AMQP_URL
  if (!url) {
    const transport = new InMemoryTransport()
    return {
      mq: await AceMq.connect(transport),
      label: 'in-memory (set AMQP_URL to use RabbitMQ)',
      prefix: 'demo',
      queues: inMemoryView(transport),
    }
  }
  const mq = await connect(url)
  return {
    mq,
    label: `RabbitMQ at ${mq.transport.description}`,
    prefix: `demo-${suffix()}`,
    queues: await rabbitView(url),
  }
}

/** Postgres when `DATABASE_URL` is set, otherwise a SQLite file in a temporary directory. */
export function openStores(): Promise<Stores> {
  const url = process.env.DATABASE_URL
  return url ? openPostgres(url) : openSqlite()
}

async function openSqlite(): Promise<Stores> {
  const dir = mkdtempSync(join(tmpdir(), 'acemq-demo-'))
  const file = join(dir, 'idempotency.db')
  // What your migrations would do once: the store never runs DDL on its own.
  const db = new Database(file)
  db.exec(SqliteIdempotencyStore.createTableSql())
  db.close()
  // Two connections to one file, as two processes would have.
  const store = new SqliteIdempotencyStore(file)
  const otherWorker = new SqliteIdempotencyStore(file)
  return {
    kind: 'sqlite',
    label: `SQLite ${file} (set DATABASE_URL to use Postgres)`,
    store,
    otherWorker,
    async tearDown() {
      await store.close()
      await otherWorker.close()
      rmSync(dir, { recursive: true, force: true })
      return `removed ${dir}`
    },
  }
}

async function openPostgres(url: string): Promise<Stores> {
  const db = new Kysely<Record<string, never>>({
    dialect: new PostgresDialect({
      pool: survivingRestarts(new pg.Pool({ connectionString: url, max: 4 })),
    }),
  })
  // A table of the demo's own, created as a migration would and dropped at the end.
  const table = `acemq_demo_${suffix()}`
  await sql.raw(createTableSql({ table, dialect: 'postgres' })).execute(db)
  const store = new KyselyIdempotencyStore(db, { table })
  const otherWorker = new KyselyIdempotencyStore(db, { table })
  return {
    kind: 'postgres',
    label: `Postgres at ${redactUrl(url)}, table ${table}`,
    store,
    otherWorker,
    async tearDown() {
      await store.close()
      await otherWorker.close()
      await sql`DROP TABLE IF EXISTS ${sql.table(table)}`.execute(db)
      await db.destroy()
      return `dropped table ${table}`
    },
  }
}

/**
 * pg emits 'error' when Postgres drops a connection (a restart, a failover); without a
 * listener that ends the process. With one, claims fail for a moment and the pool reconnects.
 */
function survivingRestarts(pool: pg.Pool): pg.Pool {
  const warn = (error: Error): void => console.warn(`postgres connection lost: ${error.message}`)
  pool.on('error', warn)
  pool.on('connect', (client) => client.on('error', warn))
  return pool
}
