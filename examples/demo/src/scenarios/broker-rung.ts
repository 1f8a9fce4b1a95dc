import { ConsumerOptions, RetryPolicy } from '@acemq/core'
import { rungQueueName } from '@acemq/core/spi'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { ms, say } from '../print.js'

/**
 * An invoice service that answers 503 once. The policy spends waits of a second or more in
 * the broker: the message sits on a rung queue whose TTL sends it back, and the consumer
 * holds nothing meanwhile. (The default threshold is 30 s; the demo lowers it to 1 s.)
 */
export async function brokerRung(demo: DemoContext): Promise<SummaryRow> {
  const policy = RetryPolicy.fixed(3, '1s').waitInBrokerFrom('1s')
  const queue = await demo.queue('invoices', policy)
  const rung = rungQueueName(queue, 1_000) // its one rung: policy.brokerRungs() is [1000]
  demo.section('A wait spent in a broker rung', queue)
  say('demo', '', `policy ${policy}: its 1 s waits sit on ${rung}`)

  let firstAttemptAt = 0
  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults().withRetry(policy),
    async (message) => {
      const { attempt } = message.envelope
      if (attempt === 1) {
        firstAttemptAt = performance.now()
        say('handler', message.payload.id, 'attempt 1: invoice service answered 503 (throws)')
        throw new Error('invoice service answered 503')
      }
      const after = ms(performance.now() - firstAttemptAt)
      say('handler', message.payload.id, `attempt ${attempt}, ${after} after attempt 1: invoiced`)
    },
  )
  await demo.mq.publisher<Order>('', queue).send({ id: 'o-1002' }, { id: 'o-1002' })
  await demo.narrator.settled('o-1002', 'retried')
  const waiting = await demo.queues.count(rung)
  say('demo', 'o-1002', `meanwhile: ${waiting} message on ${rung}, none held by the consumer`)
  await demo.narrator.settled('o-1002', 'acked')
  await consumer.close()

  return {
    scenario: 'broker rung',
    queue,
    outcome: 'acked',
    detail: `2 attempts; waited 1 s on ${rung}`,
  }
}
