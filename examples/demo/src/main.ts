/**
 * The AceMQ order-processing demo: `pnpm demo` from the repository root.
 *
 * It runs on the in-memory transport and a SQLite file by default — nothing to install — and
 * on RabbitMQ and Postgres when `AMQP_URL` / `DATABASE_URL` are set. Each scenario in
 * `scenarios/` is one thing AceMQ does for a consumer in production; read them in order.
 */
import { Topology, type RetryPolicy } from '@acemq/core'
import type { DemoContext, SummaryRow } from './demo-context.js'
import { Narrator } from './narrator.js'
import { heading, ms, say, table } from './print.js'
import { brokerRung } from './scenarios/broker-rung.js'
import { duplicate } from './scenarios/duplicate.js'
import { flakyRetries } from './scenarios/flaky-retries.js'
import { health } from './scenarios/health.js'
import { inProgress } from './scenarios/in-progress.js'
import { pauseAndDrain } from './scenarios/pause-and-drain.js'
import { pipeline } from './scenarios/pipeline.js'
import { poisonMessage } from './scenarios/poison-message.js'
import { openBroker, openStores } from './setup.js'

const started = performance.now()
console.log('AceMQ demo: order processing')
const broker = await openBroker()
const stores = await openStores()
say('demo', '', `transport  ${broker.label}`)
say('demo', '', `store      ${stores.label}`)

// The narrator prints what the engine decides; it plugs in where @acemq/otel would.
const narrator = new Narrator()
broker.mq.setInstrumentation(narrator)

const declared: string[] = []
let sections = 0
const demo: DemoContext = {
  mq: broker.mq,
  store: stores.store,
  otherWorker: stores.otherWorker,
  narrator,
  queues: broker.queues,
  section: (title, queue) => heading(++sections, title, queue),
  async queue(name: string, policy?: RetryPolicy) {
    const queue = `${broker.prefix}.${name}`
    const topology = policy
      ? Topology.define().queueWithRetry(queue, policy)
      : Topology.define().queueWithDeadLetter(queue)
    await broker.mq.applyTopology(topology)
    for (const step of topology.plan()) if (step.kind === 'queue') declared.push(step.name)
    return queue
  },
  named: (name) => `${broker.prefix}.${name}`,
  declared: (queues) => void declared.push(...queues),
}

const rows: SummaryRow[] = []
try {
  rows.push(await flakyRetries(demo))
  rows.push(await brokerRung(demo))
  rows.push(await poisonMessage(demo))
  rows.push(await duplicate(demo))
  rows.push(await inProgress(demo))
  rows.push(await pauseAndDrain(demo))
  rows.push(await health(demo, stores.kind))
  rows.push(await pipeline(demo))

  heading(++sections, 'Shutdown')
  const closing = performance.now()
  await broker.mq.close()
  say('demo', '', `mq.close(): drained and closed in ${ms(performance.now() - closing)}`)
} finally {
  await broker.mq.close()
  await broker.queues.deleteQueues(declared)
  await broker.queues.close()
  const removed = await stores.tearDown()
  say('demo', '', `cleaned up: deleted ${declared.length} demo queues, ${removed}`)
}

console.log('\nSummary')
table(
  ['#', 'scenario', 'queue', 'outcome', 'what happened'],
  rows.map((row, i) => [String(i + 1), row.scenario, row.queue, row.outcome, row.detail]),
)
console.log(`\nDone in ${ms(performance.now() - started)}.`)
