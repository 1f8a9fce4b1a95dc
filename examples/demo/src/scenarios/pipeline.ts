import { RetryPolicy } from '@acemq/core'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { say } from '../print.js'

/**
 * A checkout as a pipeline: reserve, charge and ship, each on a queue of its own. Each step's
 * result is published (confirmed) to the next step's queue before the step's message is acked;
 * the card network is busy on the first charge, and the pipeline's policy retries that step
 * alone. An order for an unknown SKU ends its run at reserve: `null`, a decision, not a failure.
 */
export async function pipeline(demo: DemoContext): Promise<SummaryRow> {
  const name = demo.named('checkout')
  let charges = 0
  const checkout = await demo.mq
    .pipeline<Order>(name)
    .step('reserve', async (order) => {
      if (order.sku === 'XL-PURPLE') {
        say('handler', order.id, 'reserve: unknown SKU, the run ends here (returns null)')
        return null
      }
      say('handler', order.id, 'reserve: stock held')
      return order
    })
    .step('charge', async (order, { message }) => {
      const { attempt } = message.envelope
      if (++charges === 1) {
        say('handler', order.id, `charge attempt ${attempt}: card network busy (throws)`)
        throw new Error('card network busy')
      }
      say('handler', order.id, `charge attempt ${attempt}: charged`)
      return order
    })
    .step('ship', async (order) => {
      say('handler', order.id, 'ship: label printed')
      return order
    })
    .idempotent(demo.store)
    .withRetry(RetryPolicy.fixed(3, '100ms'))
    .build()
  demo.declared(checkout.queues.flatMap((queue) => [queue, `${queue}.dlq`, `${queue}.parked`]))
  for (const queue of checkout.queues) demo.narrator.quiet(queue)
  demo.section('A pipeline: reserve, charge, ship', checkout.queueFor('reserve'))

  say('demo', 'o-1008', `sending it into ${checkout.steps.join(' -> ')}`)
  await checkout.send({ id: 'o-1008' }, { id: 'o-1008' })
  await demo.narrator.finished('o-1008')
  say('demo', 'o-1009', 'sending an order for an unknown SKU')
  await checkout.send({ id: 'o-1009', sku: 'XL-PURPLE' }, { id: 'o-1009' })
  await demo.narrator.finished('o-1009')
  await checkout.close()
  const counts = `${checkout.entered} entered, ${checkout.completed} completed, ${checkout.endedEarly} ended early`
  say('demo', '', `checkout: ${counts}`)

  return {
    scenario: 'pipeline',
    queue: checkout.queueFor('reserve'),
    outcome: 'completed, ended_early',
    detail: `${counts}; charge retried once`,
  }
}
