import { setTimeout as sleep } from 'node:timers/promises'
import amqplib from 'amqplib'
import {
  ConsumerOptions,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
  shutdownOnSignals,
} from '@acemq/core'
import { connect } from '@acemq/transport-amqp'

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const queue = process.env.QUEUE ?? 'examples.graceful-shutdown'
const jobMs = Number(process.env.JOB_MS ?? 1_000)

const mq = await connect(url)
await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))

// SIGTERM or SIGINT: stop taking messages, let the running job finish (up to 10 s), hand the
// rest back to the queue, close, and exit 0 (1 if the job had to be abandoned). The process
// exits once onShutdown has finished.
shutdownOnSignals(mq, {
  timeout: '10s',
  onShutdown: async ({ signal, drained, closed, durationMs }) => {
    console.log(`${signal}: drained=${drained} closed=${closed} in ${durationMs} ms`)
    await leaveNothingBehind()
    console.log('exiting')
  },
})

/**
 * The jobs that had not started are back in the queue, for the next instance. A demo run then
 * removes its queues, so it runs again the same way; a real service keeps them.
 */
async function leaveNothingBehind(): Promise<void> {
  const admin = await amqplib.connect(url)
  const channel = await admin.createChannel()
  const { messageCount } = await channel.checkQueue(queue)
  console.log(`${messageCount} job(s) handed back to ${queue}`)
  for (const name of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
    await channel.deleteQueue(name)
  }
  await admin.close()
  console.log(`removed ${queue} and its .dlq and .parked`)
}

let firstJob!: () => void
const started = new Promise<void>((resolve) => (firstJob = resolve))
await mq.consume<{ id: string }>(queue, ConsumerOptions.defaults(), async (message, { signal }) => {
  console.log(`${message.payload.id}: started, takes ${jobMs} ms`)
  firstJob()
  await sleep(jobMs, undefined, { signal }) // pass the signal on: it aborts if the drain times out
  console.log(`${message.payload.id}: finished`)
})
const jobs = mq.publisher<{ id: string }>('', queue)
for (const id of ['job-1', 'job-2', 'job-3']) await jobs.send({ id })
console.log(`consuming ${queue} (pid ${process.pid})`)

await started
if (process.env.KEEP_RUNNING === '1') {
  console.log(`waiting for a signal: kill -TERM ${process.pid}, or Ctrl-C`)
} else {
  console.log('sending SIGTERM to itself mid-job, as a deploy would')
  process.kill(process.pid, 'SIGTERM')
}
