import amqplib from 'amqplib'
import {
  InMemoryIdempotencyStore,
  RetryPolicy,
  deadLetterQueueName,
  parkedQueueName,
} from '@acemq/core'
import { connect } from '@acemq/transport-amqp'

/** What enters the checkout; each step returns it with its own part filled in. */
interface Order {
  readonly id: string
  readonly sku: string
  readonly total: number
  readonly reservation?: string
  readonly payment?: string
  readonly parcel?: string
}

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const name = process.env.CHECKOUT ?? 'examples.checkout'
const orders: Order[] = [
  { id: 'order-1', sku: 'lamp', total: 40 },
  { id: 'order-2', sku: 'chair', total: 120 }, // the payment provider times out on its first try
  { id: 'order-3', sku: 'sofa', total: 900 }, // out of stock: the run ends at reserve
  { id: 'order-4', sku: 'rug', total: 75 },
]
const inStock = new Set(['lamp', 'chair', 'rug'])

const journal = new Map<string, string[]>(orders.map((order) => [order.id, []]))
const note = (order: Order, what: string): void => void journal.get(order.id)?.push(what)
let chargeAttempts = 0
let allFinished!: () => void
const done = new Promise<void>((resolve) => (allFinished = resolve))

const mq = await connect(url, { onError: () => undefined }) // the retry is shown below
const checkout = await mq
  .pipeline<Order>(name)
  .step('reserve', async (order) => {
    if (!inStock.has(order.sku)) {
      note(order, `${order.sku} out of stock: the run ends here`)
      return null // ends the run early: not a failure, nothing to retry
    }
    note(order, 'reserved')
    return { ...order, reservation: `res-${order.id}` }
  })
  .step('charge', async (order, { message }) => {
    if (order.id === 'order-2' && ++chargeAttempts === 1) {
      note(order, 'charge failed (payment provider timed out)')
      throw new Error('payment provider timed out') // retried by the pipeline's policy
    }
    note(order, `charged ${order.total} on attempt ${message.envelope.attempt}`)
    return { ...order, payment: `pay-${order.id}` }
  })
  .step('ship', async (order) => {
    note(order, `shipped (${order.reservation}, ${order.payment})`)
    return { ...order, parcel: `parcel-${order.id}` }
  })
  // Every step claims `{pipeline}.{step}:{order id}`: a redelivered step never charges or ships twice.
  .idempotent(InMemoryIdempotencyStore.forOneDay())
  .withRetry(RetryPolicy.fixed(3, '200ms'))
  .build()

// Runs are counted where they finish; this example waits for all four.
const poll = setInterval(() => {
  if (checkout.completed + checkout.endedEarly === orders.length) allFinished()
}, 20)

console.log(`pipeline: ${checkout.steps.join(' -> ')} on ${checkout.queues.join(', ')}`)
for (const order of orders) await checkout.send(order, { id: order.id })
console.log(`sent: ${orders.length} orders`)
await done
clearInterval(poll)
const finished = checkout.completed + checkout.endedEarly
for (const order of orders) console.log(`${order.id}: ${journal.get(order.id)?.join(', ')}`)
console.log(
  `runs: ${checkout.entered} entered, ${checkout.completed} completed, ${checkout.endedEarly} ended early (${finished} finished)`,
)
await checkout.close()
await mq.close()

// A demo run leaves nothing behind, so it runs again the same way; a real service keeps its
// queues and its pipeline's exchange.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
for (const queue of checkout.queues) {
  for (const name of [queue, deadLetterQueueName(queue), parkedQueueName(queue)]) {
    await channel.deleteQueue(name)
  }
}
await channel.deleteExchange(checkout.name)
await admin.close()
console.log(
  `removed ${checkout.queues.join(', ')} and their .dlq and .parked, and the exchange ${checkout.name}`,
)
