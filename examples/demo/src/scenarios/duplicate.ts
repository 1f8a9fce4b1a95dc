import { ConsumerOptions } from '@acemq/core'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { say } from '../print.js'

/**
 * The same order confirmation published twice (a publisher that retried after a lost
 * confirm, say). The consumer is idempotent: it claims the message id in the store before
 * the handler runs, so the second copy is acked without sending a second email.
 */
export async function duplicate(demo: DemoContext): Promise<SummaryRow> {
  const queue = await demo.queue('emails')
  demo.section('A duplicate, suppressed', queue)

  let emails = 0
  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults().idempotent(demo.store),
    async (message) => {
      emails++
      say('handler', message.payload.id, 'sending the order confirmation email')
    },
  )
  const confirmations = demo.mq.publisher<Order>('', queue)
  say('demo', 'o-1004', 'publishing it twice with the same message id')
  await confirmations.send({ id: 'o-1004' }, { id: 'o-1004' })
  await confirmations.send({ id: 'o-1004' }, { id: 'o-1004' })
  await demo.narrator.settled('o-1004', 'acked', 2)
  await consumer.close()
  say('demo', 'o-1004', `2 deliveries, ${emails} email sent`)

  return {
    scenario: 'duplicate',
    queue,
    outcome: 'acked ×2',
    detail: `handler ran ${emails}× for 2 copies of one message id`,
  }
}
