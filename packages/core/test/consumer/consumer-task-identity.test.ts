import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { AceMq, ConsumerOptions, FatalError, Topology } from '../../src/index.js'
import { START, closeOnFakeClock, run, useFakeClock } from './fake-clock.js'
import { ManualDelivery, ManualTransport } from './manual-transport.js'

// A defect the mutation work found (issue 22): a delivery started from inside a handler took that
// handler's identity into its settlement (Node 20's AsyncLocalStorage.exit() is undone by a run()
// inside it). (The other, a subscription answered after close left open, is pinned in
// consumer-deliveries.test.ts.)
describe('a delivery a handler started', () => {
  let transport: ManualTransport
  let mq: AceMq
  let reported: string[]
  let onError: (() => void) | undefined

  beforeEach(async () => {
    useFakeClock()
    transport = new ManualTransport()
    reported = []
    onError = undefined
    mq = await AceMq.connect(transport, {
      onError: (_error, context) => {
        reported.push(context)
        onError?.()
      },
    })
    await mq.applyTopology(Topology.define().queueWithDeadLetter('q'))
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  function gate(): { wait: Promise<void>; open: () => void } {
    let open!: () => void
    const wait = new Promise<void>((resolve) => (open = resolve))
    return { wait, open }
  }

  it('a delivery started by a handler that resumed consuming is not settled as if inside that handler', async () => {
    const gates = { held: gate(), done: gate() }
    await mq.consume('q', ConsumerOptions.defaults().withConcurrency(2), async (message) => {
      if (message.envelope.id === 'poison') throw new FatalError('poison')
      await gates.held.wait
      mq.resumeConsuming()
      await gates.done.wait
    })
    transport.beforePublish = (message) => {
      if (message.routingKey === 'q.dlq') throw new Error('the dead-letter queue is down')
    }
    let drained: [boolean, number] | undefined
    onError = () => {
      onError = undefined
      // Not inside any handler: the drain must wait for the one still running ('resumer').
      void mq.drainConsumers('1h').then((result) => (drained = [result, Date.now() - START]))
    }
    const sub = transport.current
    sub.deliver(new ManualDelivery('resumer'))
    await run()
    mq.pauseConsuming()
    sub.deliver(new ManualDelivery('poison'))
    gates.held.open()
    await run()
    expect(reported).toHaveLength(1)
    await run(3_000)
    expect(drained).toBeUndefined()
    gates.done.open()
    await run()
    expect(drained).toEqual([true, 3_000])
  })
})
