import { ConsumerOptions, RetryPolicy } from '@acemq/core'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { ms, say } from '../print.js'

/**
 * A payment gateway that times out twice. The policy retries in the consumer, each wait
 * jittered ±20 % so that consumers that failed together do not all come back together.
 */
export async function flakyRetries(demo: DemoContext): Promise<SummaryRow> {
  const policy = RetryPolicy.exponential(4, '200ms')
  const queue = await demo.queue('payments', policy)
  demo.section('Flaky handler: jittered retries', queue)
  const planned = policy.schedule().map(ms).join(', ')
  say('demo', '', `policy ${policy}: waits ${planned}, each ±20 %, in the consumer`)

  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults().withRetry(policy),
    async (message) => {
      const { attempt } = message.envelope
      if (attempt < 3) {
        say('handler', message.payload.id, `attempt ${attempt}: payment gateway timed out (throws)`)
        throw new Error('payment gateway timed out')
      }
      say('handler', message.payload.id, `attempt ${attempt}: charged`)
    },
  )
  await demo.mq.publisher<Order>('', queue).send({ id: 'o-1001' }, { id: 'o-1001' })
  await demo.narrator.settled('o-1001', 'acked')
  await consumer.close()

  const waits = demo.narrator.of('o-1001').flatMap((s) => (s.waitedMs ? [ms(s.waitedMs)] : []))
  return {
    scenario: 'flaky handler',
    queue,
    outcome: 'acked',
    detail: `3 attempts; waited ${waits.join(', ')} (planned 200 ms, 400 ms ±20 %)`,
  }
}
