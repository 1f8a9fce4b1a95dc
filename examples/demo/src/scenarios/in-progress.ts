import { ConsumerOptions } from '@acemq/core'
import type { DemoContext, Order, SummaryRow } from '../demo-context.js'
import { say } from '../print.js'

/**
 * Another worker holds the claim on an order (it is handling a copy right now). The consumer
 * does not run the handler and does not spend an attempt: it waits, puts the message back,
 * and looks again. Once the other worker lets go, the order is handled — still attempt 1.
 */
export async function inProgress(demo: DemoContext): Promise<SummaryRow> {
  const queue = await demo.queue('stock')
  demo.section('In progress elsewhere: put back, no attempt spent', queue)
  say('demo', '', "consumer: idempotent, withInProgressDelay('250ms')")

  const claim = await demo.otherWorker.tryClaim('o-1005')
  say('demo', 'o-1005', `another worker claims it first (store answers '${claim}')`)

  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults().idempotent(demo.store).withInProgressDelay('250ms'),
    async (message) => {
      say('handler', message.payload.id, `attempt ${message.envelope.attempt}: stock reserved`)
    },
  )
  // The other worker lets go right as the second put-back settles, before the message is
  // claimed again: the story is the same however long the machine takes to poll.
  const released = demo.narrator.when('o-1005', 'in_progress', 2, () =>
    demo.otherWorker.release('o-1005'),
  )
  await demo.mq.publisher<Order>('', queue).send({ id: 'o-1005' }, { id: 'o-1005' })
  await released
  say('demo', 'o-1005', 'the other worker lets go of its claim (release)')
  await demo.narrator.settled('o-1005', 'acked')
  await consumer.close()

  return {
    scenario: 'in-progress put-back',
    queue,
    outcome: `in_progress ×${demo.narrator.count('o-1005', 'in_progress')}, acked`,
    detail: 'put back every 250 ms while claimed elsewhere; handled on attempt 1',
  }
}
