import { ConsumerOptions, RetryPolicy, deadLetterQueueName } from '@acemq/core'
import { ENVELOPE_HEADERS, headerInteger, headerString } from '@acemq/core/spi'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { say } from '../print.js'

/**
 * An order for a product that does not exist fails on every attempt. The policy gives up
 * after three and moves it to `{queue}.dlq` with the reason in `x-acemq-error`, where the
 * demo reads it back as any tool on the broker would. (A handler that knows a message can
 * never succeed throws `FatalError` instead, and it goes to the `.dlq` at once.)
 */
export async function poisonMessage(demo: DemoContext): Promise<SummaryRow> {
  const policy = RetryPolicy.fixed(3, '100ms')
  const queue = await demo.queue('shipping', policy)
  const dlq = deadLetterQueueName(queue)
  demo.section('A poison message, dead-lettered with its reason', queue)
  say('demo', '', `policy ${policy}`)

  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults().withRetry(policy),
    async (message) => {
      const { id, sku } = message.payload
      say('handler', id, `attempt ${message.envelope.attempt}: no such SKU ${sku}`)
      throw new Error(`no such SKU ${sku}`)
    },
  )
  await demo.mq
    .publisher<Order>('', queue)
    .send({ id: 'o-1003', sku: 'XL-PURPLE' }, { id: 'o-1003' })
  await demo.narrator.settled('o-1003', 'dead_lettered')
  await consumer.close()

  const copy = await demo.queues.take(dlq)
  const error = headerString(copy?.headers[ENVELOPE_HEADERS.error]) ?? '(none)'
  const attempt = headerInteger(copy?.headers[ENVELOPE_HEADERS.attempt])
  say('demo', 'o-1003', `read back from ${dlq}:`)
  say('demo', '', `x-acemq-error: ${error}`)
  say('demo', '', `x-acemq-attempt: ${attempt}, body: ${Buffer.from(copy?.body ?? []).toString()}`)

  return { scenario: 'poison message', queue, outcome: 'dead_lettered', detail: `${dlq}: ${error}` }
}
