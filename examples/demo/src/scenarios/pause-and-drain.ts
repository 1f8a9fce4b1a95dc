import { setTimeout as sleep } from 'node:timers/promises'
import { ConsumerOptions } from '@acemq/core'
import { waitUntil, type DemoContext, type Order, type SummaryRow } from '../demo-context.js'
import { ms, say } from '../print.js'

/**
 * Five orders to pack, 300 ms each. Pausing stops handing deliveries to the handler: the
 * ones that arrive wait at the gate (`held`), unacked. Draining waits for the running
 * handler to finish and settle, as a deploy would before closing. Resuming hands the same
 * held messages over.
 */
export async function pauseAndDrain(demo: DemoContext): Promise<SummaryRow> {
  const queue = await demo.queue('packing')
  demo.section('Pause and drain', queue)
  demo.narrator.quiet(queue)

  let firstStarted!: () => void
  const packingStarted = new Promise<void>((resolve) => (firstStarted = resolve))
  const consumer = await demo.mq.consume<Order>(
    queue,
    ConsumerOptions.defaults(),
    async (_message, { signal }) => {
      firstStarted()
      await sleep(300, undefined, { signal })
    },
  )
  const ids = ['o-2001', 'o-2002', 'o-2003', 'o-2004', 'o-2005']
  const orders = demo.mq.publisher<Order>('', queue)
  await Promise.all(ids.map((id) => orders.send({ id }, { id })))
  say('demo', '', `published ${ids.length} orders; the handler packs one at a time, 300 ms each`)

  await packingStarted
  demo.mq.pauseConsuming()
  await waitUntil(() => demo.mq.held === ids.length - 1, 'the other orders to reach the gate')
  const { inFlight, held } = demo.mq
  say('demo', '', `pauseConsuming(): inFlight ${inFlight}, held ${held} (delivered, not acked)`)

  const started = performance.now()
  const drained = await demo.mq.drainConsumers('5s')
  const took = ms(performance.now() - started)
  const after = `inFlight ${demo.mq.inFlight}, held ${demo.mq.held}`
  say('demo', '', `drainConsumers('5s') → ${drained} after ${took}: ${after}`)

  demo.mq.resumeConsuming()
  say('demo', '', 'resumeConsuming(): the held orders are handed over')
  await Promise.all(ids.map((id) => demo.narrator.settled(id, 'acked')))
  say('demo', '', `all ${ids.length} orders packed and acked`)
  await consumer.close()

  return {
    scenario: 'pause and drain',
    queue,
    outcome: `acked ×${ids.length}`,
    detail: `held ${held} while paused; drainConsumers → ${drained} in ${took}`,
  }
}
