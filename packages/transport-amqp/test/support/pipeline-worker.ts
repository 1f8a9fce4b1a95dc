// A worker process for the pipeline fault tests: runs every step of the pipeline PIPELINE_NAME
// on PIPELINE_URL, idempotent on the Postgres table IDEMPOTENCY_TABLE (claim timeout
// CLAIM_TIMEOUT_MS), and records each step's side effect as a row (step, run, worker) of
// EFFECTS_TABLE. With WORKER_HANG=1 the first charge it gets hangs mid-step: the worker stops
// taking work, lets every other step settle, then tells its parent (IPC) it is hanging.
import { AceMq } from '@acemq/core'
import { KyselyIdempotencyStore } from '@acemq/store-kysely'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { AmqpTransport } from '../../src/index.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`pipeline-worker needs ${name}`)
  return value
}
const worker = env('WORKER_NAME')
const hang = process.env['WORKER_HANG'] === '1'
const effects = env('EFFECTS_TABLE')

function tell(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    process.send?.(message, undefined, {}, (error) => (error ? reject(error) : resolve()))
  })
}

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4 })
const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) })
const store = new KyselyIdempotencyStore(db, {
  table: env('IDEMPOTENCY_TABLE'),
  claimTimeout: Number(env('CLAIM_TIMEOUT_MS')),
})
const mq = await AceMq.connect(
  new AmqpTransport(env('PIPELINE_URL'), {
    connectionName: `pipeline-worker-${worker}`,
    recovery: { initialDelay: 100, maxDelay: 500 },
  }),
)

async function sideEffect(step: string, run: string): Promise<void> {
  await sql`insert into ${sql.table(effects)} (step, run_id, worker) values (${step}, ${run}, ${worker})`.execute(
    db,
  )
}

let hanging = false
const pipeline = await mq
  .pipeline<{ readonly n: number }>(env('PIPELINE_NAME'))
  .step('reserve', async (order, { runId }) => {
    await sideEffect('reserve', runId)
    return order
  })
  .step('charge', async (order, { runId }) => {
    if (hang && !hanging) {
      hanging = true
      // Mid-step: claimed, nothing done. Nothing else runs here from now on.
      mq.pauseConsuming()
      while (mq.inFlight > 1) await new Promise((resolve) => setTimeout(resolve, 5))
      await tell({ type: 'hanging', run: runId })
      await new Promise(() => undefined)
    }
    await sideEffect('charge', runId)
    return order
  })
  .step('ship', async (order, { runId }) => {
    await sideEffect('ship', runId)
    return order
  })
  .idempotent(store)
  .withConcurrency(4)
  .build()
await tell({ type: 'consuming', worker })
process.on('disconnect', () => {
  void pipeline
    .close({ drainTimeout: 0 })
    .then(() => mq.close({ drainTimeout: 0 }))
    .then(() => db.destroy())
    .finally(() => process.exit(0))
})
