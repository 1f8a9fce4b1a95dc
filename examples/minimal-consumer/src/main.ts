import amqplib from 'amqplib'
import {
  ConsumerOptions,
  RetryPolicy,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
} from '@acemq/core'
import { connect } from '@acemq/transport-amqp'

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const queue = process.env.QUEUE ?? 'examples.minimal-consumer'
const policy = RetryPolicy.exponential(5, '200ms', '5s') // 5 attempts: 200 ms, 400 ms, ... ±20 %

await using mq = await connect(url)
await mq.applyTopology(Topology.define().queueWithRetry(queue, policy))

let finish!: () => void
const done = new Promise<void>((resolve) => (finish = resolve))
await mq.consume<{ id: string }>(queue, ConsumerOptions.defaults().withRetry(policy), (message) => {
  const { attempt } = message.envelope
  console.log(`${message.payload.id}: attempt ${attempt}`)
  if (attempt === 1) throw new Error('the first attempt fails, to show a retry') // → retried
  finish() // returning acks the message
})
await mq.publisher<{ id: string }>('', queue).send({ id: 'order-1' }) // resolves on confirm
await done
console.log('handled; closing')
await mq.close()

// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its queues.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
for (const name of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
  await channel.deleteQueue(name)
}
await admin.close()
console.log(`removed ${queue} and its .dlq and .parked`)
