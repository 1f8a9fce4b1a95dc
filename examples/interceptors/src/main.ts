import amqplib from 'amqplib'
import {
  ConsumerOptions,
  Topology,
  deadLetterQueueName,
  parkedQueueName,
  type Headers,
} from '@acemq/core'
import { readEnvelope } from '@acemq/core/spi'
import { connect } from '@acemq/transport-amqp'

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const queue = process.env.QUEUE ?? 'examples.interceptors'
const tenants = new Set(['acme'])

await using mq = await connect(url)
await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))

// A header stamper: every publish of this connection says which service sent it.
mq.intercept({
  name: 'stamper',
  beforePublish: (publish) => ({ headers: { ...publish.headers, 'x-service': 'orders-api' } }),
})
// An audit logger: runs last (order 100), after the handler, and sees how the message settles.
mq.intercept({
  name: 'audit',
  order: 100,
  afterHandle: (message, ack) => {
    console.log(
      `audit: ${message.envelope.id} (${String(message.headers['x-tenant'])}) -> ${ack.kind}`,
    )
  },
})
// A tenant check for this consumer only: a message from an unknown tenant never reaches the
// handler; it goes to {queue}.dlq with the reason, once (never requeued).
const tenantCheck = ConsumerOptions.defaults().withInterceptors({
  name: 'tenant-check',
  order: 10,
  beforeHandle: (message) => {
    const tenant = String(message.headers['x-tenant'])
    return tenants.has(tenant) ? undefined : { refuse: `unknown tenant '${tenant}'` }
  },
})

let finish!: () => void
const handled = new Promise<void>((resolve) => (finish = resolve))
await mq.consume<{ id: string }>(queue, tenantCheck, (message) => {
  const { id } = message.payload
  console.log(
    `handled ${id} for ${String(message.headers['x-tenant'])}, sent by ${String(message.headers['x-service'])}`,
  )
  finish()
})
const orders = mq.publisher<{ id: string }>('', queue)
await orders.send({ id: 'order-1' }, { id: 'order-1', headers: { 'x-tenant': 'acme' } })
await orders.send({ id: 'order-2' }, { id: 'order-2', headers: { 'x-tenant': 'initech' } })
await handled

// Read the refused message back from the dead-letter queue, as an operator would.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
let refused: amqplib.GetMessage | false = false
for (let tries = 0; refused === false && tries < 100; tries++) {
  refused = await channel.get(deadLetterQueueName(queue), { noAck: true })
  if (refused === false) await new Promise((resolve) => setTimeout(resolve, 50))
}
if (refused === false) throw new Error(`nothing reached ${deadLetterQueueName(queue)}`)
const { envelope } = readEnvelope(refused.properties.headers as Headers, { routingKey: queue })
console.log(`in ${deadLetterQueueName(queue)}: ${envelope.id}: ${String(envelope.error)}`)
await mq.close()

// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its queues.
for (const name of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
  await channel.deleteQueue(name)
}
await admin.close()
console.log(`removed ${queue} and its .dlq and .parked`)
