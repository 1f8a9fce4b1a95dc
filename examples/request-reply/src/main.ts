import amqplib from 'amqplib'
import { ConsumerOptions, FatalError, RetryPolicy, Topology } from '@acemq/core'
import { describeError } from '@acemq/core/spi'
import { connect } from '@acemq/transport-amqp'

/** What the requester asks for, and what the responder answers. */
interface Quote {
  readonly sku: string
  readonly quantity: number
}
interface Price {
  readonly sku: string
  readonly total: number
}

const url = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const queue = process.env.PRICING ?? 'examples.pricing'
const prices = new Map([
  ['lamp', 40],
  ['chair', 120],
])

const mq = await connect(url, { onError: () => undefined }) // failures are shown below
await mq.applyTopology(Topology.define().queueWithDeadLetter(queue))

// The responder is an ordinary consumer: its return value is the reply.
const pricing = await mq.respond<Quote, Price>(
  queue,
  { consumer: ConsumerOptions.defaults().withRetry(RetryPolicy.fixed(2, '100ms')) },
  async (message) => {
    const { sku, quantity } = message.payload
    if (sku === 'slow') await new Promise((resolve) => setTimeout(resolve, 1_000))
    const unit = prices.get(sku)
    if (unit === undefined) throw new FatalError(`no price for ${sku}`) // an error reply, at once
    return { sku, total: unit * quantity }
  },
)
console.log(`responder: answering on ${queue}`)

const requester = mq.requester({ timeout: '5s' })
const ask = async (routingKey: string, quote: Quote, timeout?: string): Promise<void> => {
  const label = `${quote.quantity} x ${quote.sku}`
  try {
    const price = await requester.request<Quote, Price>('', routingKey, quote, {
      ...(timeout !== undefined && { timeout: timeout as '1s' }),
    })
    console.log(`${label}: ${price.total}`)
  } catch (error) {
    const name = error instanceof Error ? error.name : 'Error'
    console.log(`${label}: ${name}: ${describeError(error)}`)
  }
}

await ask(queue, { sku: 'lamp', quantity: 3 })
await ask(queue, { sku: 'chair', quantity: 2 })
await ask(queue, { sku: 'sofa', quantity: 1 }) // the responder cannot price it
await ask(queue, { sku: 'slow', quantity: 1 }, '200ms') // answered after the timeout
await ask(`${queue}.nobody`, { sku: 'lamp', quantity: 1 }) // no queue takes it
await new Promise((resolve) => setTimeout(resolve, 1_200)) // the slow reply comes, unmatched

console.log(
  `requester: ${requester.answered} answered, ${requester.timedOut} timed out, ${requester.unmatched} unmatched, ${requester.failed} failed`,
)
console.log(`responder: ${pricing.answered} answered, ${pricing.unanswerable} unanswerable`)

await pricing.close()
await requester.close()
await mq.close()

// Leave nothing behind: the queue, its dead-letter queues and the reply queue.
const admin = await amqplib.connect(url)
const channel = await admin.createChannel()
for (const name of [queue, `${queue}.dlq`, `${queue}.parked`, requester.replyQueue])
  await channel.deleteQueue(name)
await admin.close()
console.log(`removed ${queue}, its .dlq and .parked, and the reply queue`)
