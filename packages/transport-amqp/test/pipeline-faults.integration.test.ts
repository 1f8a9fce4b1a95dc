// Pipelines under faults, on RabbitMQ with an idempotent store on Postgres: every run must
// complete exactly once per step (each step's side effect is a row, counted), nothing lost.
import { fork, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AceMq } from '@acemq/core'
import { type OutgoingMessage, type Transport } from '@acemq/core/spi'
import { KyselyIdempotencyStore, createTableSql } from '@acemq/store-kysely'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AmqpAdmin } from '../../../test-support/amqp-admin.js'
import {
  AMQP_URL,
  DATABASE_URL,
  eventually,
  requirePostgres,
  requireRabbit,
  uniqueName,
} from '@acemq/testing'
import { TcpFaultProxy } from '../../../test-support/tcp-fault-proxy.js'
import { AmqpTransport } from '../src/index.js'

const ready = (await requireRabbit()) && (await requirePostgres())
const here = path.dirname(fileURLToPath(import.meta.url))
const STEPS = ['reserve', 'charge', 'ship'] as const

interface Database {
  readonly db: Kysely<Record<string, never>>
  readonly idempotencyTable: string
  readonly effectsTable: string
  /** `{step} {run}` → the workers whose side effect it was, one entry per time it happened. */
  effects(): Promise<Map<string, string[]>>
  drop(): Promise<void>
}

async function database(): Promise<Database> {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 })
  const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
  const idempotencyTable = uniqueName('pipeline_idem').replace(/\W/g, '_')
  const effectsTable = uniqueName('pipeline_effects').replace(/\W/g, '_')
  await sql.raw(createTableSql({ table: idempotencyTable, dialect: 'postgres' })).execute(db)
  await sql`create table ${sql.table(effectsTable)} (seq bigserial primary key, step text not null, run_id text not null, worker text not null)`.execute(
    db,
  )
  return {
    db,
    idempotencyTable,
    effectsTable,
    async effects() {
      const { rows } = await sql<{
        step: string
        run_id: string
        worker: string
      }>`select step, run_id, worker from ${sql.table(effectsTable)} order by seq`.execute(db)
      const map = new Map<string, string[]>()
      for (const row of rows) {
        const key = `${row.step} ${row.run_id}`
        map.set(key, [...(map.get(key) ?? []), row.worker])
      }
      return map
    },
    async drop() {
      await sql`drop table if exists ${sql.table(effectsTable)}`.execute(db)
      await sql`drop table if exists ${sql.table(idempotencyTable)}`.execute(db)
      await db.destroy()
    },
  }
}

/** Every step of every run happened exactly once (by any worker). */
function expectOncePerStep(effects: Map<string, string[]>, runs: readonly string[]): void {
  const counts: Record<string, number> = {}
  for (const run of runs) {
    for (const step of STEPS) counts[`${step} ${run}`] = effects.get(`${step} ${run}`)?.length ?? 0
  }
  const wrong = Object.entries(counts).filter(([, count]) => count !== 1)
  expect(wrong, 'steps that did not happen exactly once').toEqual([])
  expect(effects.size).toBe(runs.length * STEPS.length)
}

/** `inner`, with `afterPublish` called once each publish it passes on is confirmed. */
function watchingPublishes(
  inner: Transport,
  afterPublish: (message: OutgoingMessage) => void,
): Transport {
  return new Proxy(inner, {
    get(target, property) {
      if (property === 'publish') {
        return async (message: OutgoingMessage, options?: Parameters<Transport['publish']>[1]) => {
          await target.publish(message, options)
          afterPublish(message)
        }
      }
      const value: unknown = Reflect.get(target, property)
      return typeof value === 'function'
        ? (value as (...args: unknown[]) => unknown).bind(target)
        : value
    },
  })
}

describe.runIf(ready)('a pipeline under faults, idempotent on Postgres', () => {
  let data: Database
  let admin: AmqpAdmin
  let name: string

  beforeEach(async () => {
    data = await database()
    admin = await AmqpAdmin.open()
    name = uniqueName('pipeline-faults')
  })

  afterEach(async () => {
    for (const step of STEPS) {
      const queue = `${name}.${step}`
      await admin.deleteQueues(queue, `${queue}.dlq`, `${queue}.parked`)
    }
    // The pipeline's exchange (docs/design.md §15).
    const channel = await admin.connection.createChannel()
    channel.on('error', () => undefined)
    await channel.deleteExchange(name).catch(() => undefined)
    await channel.close().catch(() => undefined)
    await admin.close()
    await data.drop()
  })

  it("completes every run exactly once per step when the connection dies between a step's confirmed hop and its ack", async () => {
    const proxy = await TcpFaultProxy.start('127.0.0.1', Number(new URL(AMQP_URL).port || 5672))
    const connection = `${name}-cut`
    const cuts: Promise<unknown>[] = []
    let hopsToCharge = 0
    const transport = watchingPublishes(
      new AmqpTransport(proxy.urlFor(AMQP_URL), {
        connectionName: connection,
        recovery: { initialDelay: 100, maxDelay: 500 },
      }),
      (message) => {
        if (message.exchange !== name || message.routingKey !== 'charge') return
        hopsToCharge++
        // The hop is confirmed; the reserve delivery's claim confirm and ack are still to come.
        // The consumer connection dies at its next frame to the broker.
        if (hopsToCharge === 5 || hopsToCharge === 15) {
          cuts.push(proxy.cutMidFrame(`${connection} (consume)`, 'to-broker'))
        }
      },
    )
    const mq = await AceMq.connect(transport, { onError: () => undefined })
    const store = new KyselyIdempotencyStore(data.db, { table: data.idempotencyTable })
    const effect = (step: string, run: string): Promise<unknown> =>
      sql`insert into ${sql.table(data.effectsTable)} (step, run_id, worker) values (${step}, ${run}, 'one')`.execute(
        data.db,
      )
    try {
      const checkout = await mq
        .pipeline<{ readonly n: number }>(name)
        .step('reserve', async (order, { runId }) => {
          await effect('reserve', runId)
          return order
        })
        .step('charge', async (order, { runId }) => {
          await effect('charge', runId)
          return order
        })
        .step('ship', async (order, { runId }) => {
          await effect('ship', runId)
          return order
        })
        .idempotent(store)
        .withConcurrency(4)
        .build()
      const runs = Array.from({ length: 30 }, (_, n) => `run-${n}`)
      for (const [n, run] of runs.entries()) await checkout.send({ n }, { id: run })
      await eventually(() => cuts.length === 2, 30_000, 'two hops to charge seen')
      const cut = await Promise.all(cuts)
      expect(cut).toHaveLength(2)
      await eventually(
        async () => (await data.effects()).size === runs.length * STEPS.length,
        60_000,
        'every step of every run',
      )
      await eventually(
        async () => {
          for (const queue of checkout.queues) if ((await admin.count(queue)) !== 0) return false
          return mq.inFlight === 0 && mq.waiting === 0
        },
        30_000,
        'the step queues drained',
      )
      expectOncePerStep(await data.effects(), runs)
      expect(checkout.completed).toBe(runs.length)
      for (const queue of checkout.queues) {
        expect(await admin.count(`${queue}.dlq`)).toBe(0)
        expect(await admin.count(`${queue}.parked`)).toBe(0)
      }
    } finally {
      await mq.close({ drainTimeout: 0 })
      await proxy.close()
    }
  }, 120_000)

  it('completes every run exactly once per step when a worker is killed (SIGKILL) mid-step and another takes over its claim', async () => {
    const claimTimeoutMs = 3_000
    const env = {
      PIPELINE_URL: AMQP_URL,
      PIPELINE_NAME: name,
      DATABASE_URL,
      IDEMPOTENCY_TABLE: data.idempotencyTable,
      EFFECTS_TABLE: data.effectsTable,
      CLAIM_TIMEOUT_MS: String(claimTimeoutMs),
    }
    // This process only sends; the two workers run the steps.
    const mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    const doomed = startWorker({ ...env, WORKER_NAME: 'doomed', WORKER_HANG: '1' })
    let survivor: Worker | undefined
    try {
      const checkout = await mq
        .pipeline<{ readonly n: number }>(name)
        .step('reserve', async (order) => order)
        .step('charge', async (order) => order)
        .step('ship', async (order) => order)
        .build({ consume: [] })
      await doomed.consuming
      survivor = startWorker({ ...env, WORKER_NAME: 'survivor' })
      await survivor.consuming
      const runs = Array.from({ length: 20 }, (_, n) => `run-${n}`)
      for (const [n, run] of runs.entries()) await checkout.send({ n }, { id: run })
      const hung = await doomed.hanging
      const killedAt = Date.now()
      doomed.child.kill('SIGKILL')
      await exited(doomed.child)

      await eventually(
        async () => (await data.effects()).size === runs.length * STEPS.length,
        60_000,
        'every step of every run',
      )
      const effects = await data.effects()
      expectOncePerStep(effects, runs)
      // The killed worker's step was run by the survivor, once the dead claim had expired.
      expect(effects.get(`charge ${hung}`)).toEqual(['survivor'])
      expect(Date.now() - killedAt).toBeGreaterThanOrEqual(claimTimeoutMs - 500)
      await eventually(
        async () => {
          for (const queue of checkout.queues) if ((await admin.count(queue)) !== 0) return false
          return true
        },
        30_000,
        'the step queues drained',
      )
      for (const queue of checkout.queues) {
        expect(await admin.count(`${queue}.dlq`)).toBe(0)
        expect(await admin.count(`${queue}.parked`)).toBe(0)
      }
    } finally {
      doomed.child.kill('SIGKILL')
      survivor?.child.disconnect()
      if (survivor !== undefined) await exited(survivor.child)
      await mq.close({ drainTimeout: 0 })
    }
  }, 120_000)
})

interface Worker {
  readonly child: ChildProcess
  readonly consuming: Promise<void>
  /** The run whose charge step the worker is hanging in. */
  readonly hanging: Promise<string>
}

/** A worker process (support/pipeline-worker.ts) running every step of the pipeline. */
function startWorker(env: Record<string, string>): Worker {
  const child = fork(path.join(here, 'support', 'pipeline-worker.ts'), [], {
    execArgv: ['--conditions=@acemq/source', '--import', 'tsx'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const exit = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(new Error(`the worker exited (${code ?? signal})`)),
    ),
  )
  exit.catch(() => undefined)
  const message = <T>(type: string, pick: (m: Record<string, unknown>) => T): Promise<T> =>
    Promise.race([
      new Promise<T>((resolve) => {
        const listen = (m: Record<string, unknown>): void => {
          if (m['type'] !== type) return
          child.off('message', listen)
          resolve(pick(m))
        }
        child.on('message', listen)
      }),
      exit,
    ])
  const consuming = message('consuming', () => undefined)
  const hanging = message('hanging', (m) => m['run'] as string)
  // A worker that exits without hanging (the survivor) is not a failure of its own.
  hanging.catch(() => undefined)
  return { child, consuming, hanging }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}
