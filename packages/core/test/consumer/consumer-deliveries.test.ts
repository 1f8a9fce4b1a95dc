import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  Ack,
  AceMq,
  ConfigurationError,
  ConsumerOptions,
  ErrorCodes,
  Topology,
  type Consumer,
  type Handler,
} from '../../src/index.js'
import { closeOnFakeClock, run, settled, useFakeClock } from './fake-clock.js'
import { ManualDelivery, ManualTransport } from './manual-transport.js'

// What the consumer does with the deliveries a transport hands it, driven by hand: the buffer
// behind a full handler slot or a pause, a lost channel or connection, a long pause that lets
// the subscription go, a close. Each delivery records how it was settled.

describe('the consumer’s deliveries (driven by hand, fake clock)', () => {
  let transport: ManualTransport
  let mq: AceMq
  let reported: [string, unknown][]

  beforeEach(async () => {
    useFakeClock()
    transport = new ManualTransport()
    reported = []
    mq = await AceMq.connect(transport, {
      onError: (error, context) => reported.push([context, error]),
    })
    await mq.applyTopology(Topology.define().queueWithDeadLetter('q'))
  })

  afterEach(async () => {
    await closeOnFakeClock(mq)
  })

  /** A consumer of `q` that records the ids it handled. */
  async function consume(
    options: ConsumerOptions,
    handler?: Handler<unknown>,
  ): Promise<{ consumer: Consumer; handled: string[] }> {
    const handled: string[] = []
    const consumer = await mq.consume('q', options, async (message, context) => {
      const result = await handler?.(message, context)
      handled.push(message.envelope.id)
      return result
    })
    return { consumer, handled }
  }

  /** A promise the test resolves. */
  function gate(): { wait: Promise<void>; open: () => void } {
    let open!: () => void
    const wait = new Promise<void>((resolve) => (open = resolve))
    return { wait, open }
  }

  async function consumersDetails(): Promise<Record<string, string>> {
    const health = await mq.health()
    const report = health.reports.find((r) => r.name === 'consumers')
    return { status: report?.status ?? 'none', ...report?.details }
  }

  describe('while a handler slot is taken', () => {
    it('holds nothing at the pause gate: the deliveries wait their turn and run one after the other', async () => {
      const slow = gate()
      const { handled } = await consume(
        ConsumerOptions.defaults().withConcurrency(1),
        async (message) => {
          if (message.envelope.id === 'first') await slow.wait
        },
      )
      const sub = transport.current
      const first = sub.deliver(new ManualDelivery('first'))
      const second = sub.deliver(new ManualDelivery('second'))
      const third = sub.deliver(new ManualDelivery('third'))
      await run()
      expect(mq.inFlight).toBe(1)
      expect(mq.held).toBe(0)
      expect(handled).toEqual([])
      slow.open()
      await run()
      expect(handled).toEqual(['first', 'second', 'third'])
      expect([first, second, third].map((d) => d.settlements)).toEqual([['ack'], ['ack'], ['ack']])
      expect(mq.inFlight).toBe(0)
    })

    it('does not hand over a buffered delivery whose channel has gone meanwhile', async () => {
      const { handled } = await consume(ConsumerOptions.defaults())
      mq.pauseConsuming()
      const sub = transport.current
      const gone = sub.deliver(new ManualDelivery('gone', { settleable: true }))
      const next = sub.deliver(new ManualDelivery('next', { settleable: true }))
      expect(mq.held).toBe(2)
      gone.settleable = false
      mq.resumeConsuming()
      await run()
      expect(handled).toEqual(['next'])
      expect(gone.settlements).toEqual([])
      expect(next.settlements).toEqual(['ack'])
    })

    it('works through a backlog of synchronous handlers without growing the stack', async () => {
      let handled = 0
      const depths: number[] = []
      await mq.consume('q', ConsumerOptions.defaults(), () => {
        handled++
        if (handled === 1 || handled === 2_000)
          depths.push(String(new Error().stack).split('\n').length)
      })
      mq.pauseConsuming()
      const sub = transport.current
      const deliveries = Array.from({ length: 2_000 }, (_, i) =>
        sub.deliver(new ManualDelivery(`m-${i}`)),
      )
      expect(mq.held).toBe(2_000)
      const limit = Error.stackTraceLimit
      Error.stackTraceLimit = Infinity
      try {
        mq.resumeConsuming()
      } finally {
        Error.stackTraceLimit = limit
      }
      await run()
      expect(handled).toBe(2_000)
      expect(deliveries.filter((d) => d.settlements.join() !== 'ack')).toEqual([])
      // The last handler runs as deep in the stack as the first.
      expect(depths).toHaveLength(2)
      expect(depths[1]).toBe(depths[0])
    })
  })

  describe('a synchronous handler', () => {
    it('has its delivery acked before the transport’s delivery callback returns', async () => {
      await mq.consume('q', ConsumerOptions.defaults(), () => undefined)
      const delivery = transport.current.deliver(new ManualDelivery('now'))
      expect(delivery.settlements).toEqual(['ack'])
      expect(mq.inFlight).toBe(0)
    })

    it('has a result it returns applied before the transport’s delivery callback returns', async () => {
      await mq.consume('q', ConsumerOptions.defaults(), () => Ack.release())
      const delivery = transport.current.deliver(new ManualDelivery('now'))
      expect(delivery.settlements).toEqual(['requeue'])
      expect(mq.inFlight).toBe(0)
    })

    it('that returns null has its message acked', async () => {
      await mq.consume('q', ConsumerOptions.defaults(), () => null as unknown as undefined)
      const delivery = transport.current.deliver(new ManualDelivery('null'))
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(transport.messageCount('q')).toBe(0)
      expect(reported).toEqual([])
    })

    it('that returns a thenable function has what it resolves to applied', async () => {
      const thenable = Object.assign(() => undefined, {
        then: (resolve: (value: unknown) => void) => resolve(Ack.park('from a thenable')),
      })
      await mq.consume('q', ConsumerOptions.defaults(), () => thenable as unknown as undefined)
      const delivery = transport.current.deliver(new ManualDelivery('thenable'))
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(transport.messageCount('q.parked')).toBe(1)
    })
  })

  describe('a transport that fails to settle', () => {
    it('hands the message back when the ack of a synchronous handler’s delivery throws, and goes on', async () => {
      await mq.consume('q', ConsumerOptions.defaults(), () => undefined)
      const sub = transport.current
      const broken = new ManualDelivery('broken')
      broken.ackThrows = new Error('the channel broke while acking')
      sub.deliver(broken)
      await run()
      expect(broken.settlements).toEqual(['requeue'])
      expect(mq.inFlight).toBe(0)
      // Said, not swallowed: the transport is at fault and the message will run again.
      expect(reported.map(([context, error]) => [context, String(error)])).toEqual([
        [
          "handling a message on 'q' (it goes back to the queue and runs again)",
          'Error: the channel broke while acking',
        ],
      ])
      expect(sub.deliver(new ManualDelivery('next')).settlements).toEqual(['ack'])
    })

    it('hands the message back when the ack of an asynchronous handler’s delivery throws, and goes on', async () => {
      const { handled } = await consume(ConsumerOptions.defaults().withConcurrency(1))
      const sub = transport.current
      const broken = new ManualDelivery('broken')
      broken.ackThrows = new Error('the channel broke while acking')
      sub.deliver(broken)
      const next = sub.deliver(new ManualDelivery('next'))
      await run()
      expect(broken.settlements).toEqual(['requeue'])
      expect(next.settlements).toEqual(['ack'])
      expect(handled).toEqual(['broken', 'next'])
      expect(mq.inFlight).toBe(0)
      expect(reported.map(([context]) => context)).toEqual([
        "handling a message on 'q' (it goes back to the queue and runs again)",
      ])
    })
  })

  describe('a transport that can settle nothing', () => {
    it.each([
      ['synchronous', (): undefined => undefined],
      ['asynchronous', async (): Promise<void> => {}],
    ])(
      'reports a %s handler’s delivery whose ack and nack both throw, frees its slot, and goes on',
      async (_, handler) => {
        await mq.consume('q', ConsumerOptions.defaults(), handler)
        const sub = transport.current
        const broken = new ManualDelivery('broken')
        broken.ackThrows = new Error('the channel broke while acking')
        broken.nackThrows = new Error('the channel broke while nacking')
        sub.deliver(broken)
        await run()
        expect(broken.settlements).toEqual([])
        expect(mq.inFlight).toBe(0)
        expect(reported.map(([, error]) => String(error))).toEqual([
          'Error: the channel broke while acking',
        ])
        const next = sub.deliver(new ManualDelivery('next'))
        await run()
        expect(next.settlements).toEqual(['ack'])
        expect(mq.inFlight).toBe(0)
      },
    )
  })

  describe('a lost connection', () => {
    it('drops the held deliveries a transport cannot vouch for, keeps those it says are settleable, and reports the loss', async () => {
      const { handled } = await consume(ConsumerOptions.defaults())
      mq.pauseConsuming()
      const sub = transport.current
      const unknownFirst = sub.deliver(new ManualDelivery('unknown-1'))
      const kept = sub.deliver(new ManualDelivery('kept', { settleable: true }))
      const unknownLast = sub.deliver(new ManualDelivery('unknown-2'))
      expect(mq.held).toBe(3)
      transport.emit({ type: 'disconnected', error: undefined })
      expect(mq.held).toBe(1)
      mq.resumeConsuming()
      await run()
      expect(handled).toEqual(['kept'])
      expect(kept.settlements).toEqual(['ack'])
      expect(unknownFirst.settlements).toEqual([])
      expect(unknownLast.settlements).toEqual([])
      expect(reported.map(([context]) => context)).toEqual(['the connection was lost; recovering'])
    })
  })

  describe('a lost channel', () => {
    it('drops the held deliveries it carried that are not known settleable, reports it once and is DEGRADED until consuming again', async () => {
      const { handled } = await consume(ConsumerOptions.defaults())
      mq.pauseConsuming()
      const sub = transport.current
      const unknown = sub.deliver(new ManualDelivery('unknown'))
      const kept = sub.deliver(new ManualDelivery('kept', { settleable: true }))
      const gone = sub.deliver(new ManualDelivery('gone', { settleable: false }))
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
      sub.status({ type: 'channel-lost', error: undefined })
      expect(mq.held).toBe(1)
      expect(reported).toHaveLength(1)
      const [context, error] = reported[0] ?? []
      expect(context).toBe("the consumer on 'q' lost its channel; the transport subscribes again")
      expect(error).toMatchObject({
        code: ErrorCodes.CHANNEL_CLOSED,
        message: "the channel of the consumer on 'q' closed",
      })
      expect(await consumersDetails()).toMatchObject({ status: 'DEGRADED', unsubscribed: 'q' })
      sub.status({ type: 'consuming' })
      const details = await consumersDetails()
      expect(details).toMatchObject({ status: 'UP' })
      expect(details).not.toHaveProperty('unsubscribed')
      mq.resumeConsuming()
      await run()
      expect(handled).toEqual(['kept'])
      expect(kept.settlements).toEqual(['ack'])
      expect([unknown, gone].map((d) => d.settlements)).toEqual([[], []])
    })
  })

  describe('a long pause', () => {
    it('lets go heldTimeout after the pause even when a handler finishes meanwhile: held deliveries go back, the subscription is cancelled', async () => {
      const slow = gate()
      const { handled } = await consume(
        ConsumerOptions.defaults().withConcurrency(1).withHeldTimeout('10s'),
        async (message) => {
          if (message.envelope.id === 'slow') await slow.wait
        },
      )
      const sub = transport.current
      const running = sub.deliver(new ManualDelivery('slow'))
      await run()
      mq.pauseConsuming()
      const queued = sub.deliver(new ManualDelivery('queued'))
      expect(mq.held).toBe(1)
      await run(3_000)
      slow.open()
      await run()
      expect(running.settlements).toEqual(['ack'])
      expect(handled).toEqual(['slow'])
      await run(6_999)
      expect(queued.settlements).toEqual([])
      expect(sub.cancels).toBe(0)
      await run(1)
      expect(queued.settlements).toEqual(['requeue'])
      expect(mq.held).toBe(0)
      expect(sub.cancels).toBe(1)
      // Nothing it carried is running: its channel is closed too.
      expect(sub.closes).toBe(1)
      // Let go is no trouble: nothing is lost, it subscribes again on resume.
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
    })

    it('closes the subscription it let go of only once the deliveries it carried are settled, and hands back one arriving late', async () => {
      const slow = gate()
      const { handled } = await consume(
        ConsumerOptions.defaults().withConcurrency(2).withHeldTimeout('10s'),
        async (message) => {
          if (message.envelope.id.startsWith('slow')) await slow.wait
        },
      )
      const old = transport.current
      const running = [
        old.deliver(new ManualDelivery('slow-1')),
        old.deliver(new ManualDelivery('slow-2')),
      ]
      await run()
      expect(mq.inFlight).toBe(2)
      mq.pauseConsuming()
      await run(10_000)
      expect(old.cancels).toBe(1)
      expect(old.closes).toBe(0)
      const late = old.deliver(new ManualDelivery('late', { settleable: true }))
      expect(late.settlements).toEqual(['requeue'])
      expect(mq.held).toBe(0)
      slow.open()
      await run()
      expect(running.map((d) => d.settlements)).toEqual([['ack'], ['ack']])
      expect(old.closes).toBe(1)
      mq.resumeConsuming()
      await run()
      expect(transport.subscriptions).toHaveLength(2)
      const fresh = transport.current
      fresh.deliver(new ManualDelivery('again'))
      fresh.deliver(new ManualDelivery('and-again'))
      await run()
      expect(handled).toEqual(['slow-1', 'slow-2', 'again', 'and-again'])
      // Consuming again on the one new subscription: a later long pause lets that one go.
      expect(transport.subscriptions).toHaveLength(2)
      mq.pauseConsuming()
      await run(10_000)
      expect(fresh.cancels).toBe(1)
      expect(fresh.closes).toBe(1)
    })

    it('counts heldTimeout from the latest pause: a resume in between starts it again', async () => {
      await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      const sub = transport.current
      mq.pauseConsuming()
      await run(1_000)
      sub.deliver(new ManualDelivery('during-the-first-pause'))
      await run(1_000)
      mq.resumeConsuming()
      await run(3_000)
      // Paused again at 5 s: let go at 15 s, not at 10 s.
      mq.pauseConsuming()
      await run(5_000)
      expect(sub.cancels).toBe(0)
      await run(4_999)
      expect(sub.cancels).toBe(0)
      await run(1)
      expect(sub.cancels).toBe(1)
    })

    it('keeps the held deliveries of its new subscription when the one it let go of loses its channel', async () => {
      const { handled } = await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      const old = transport.current
      mq.pauseConsuming()
      await run(10_000)
      mq.resumeConsuming()
      await run()
      const fresh = transport.current
      expect(fresh).not.toBe(old)
      mq.pauseConsuming()
      const held = fresh.deliver(new ManualDelivery('held'))
      old.status({ type: 'channel-lost', error: new Error('gone') })
      expect(mq.held).toBe(1)
      mq.resumeConsuming()
      await run()
      expect(handled).toEqual(['held'])
      expect(held.settlements).toEqual(['ack'])
    })

    it('does not report a lost channel of the subscription it let go of', async () => {
      await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      const old = transport.current
      mq.pauseConsuming()
      await run(10_000)
      expect(old.cancels).toBe(1)
      old.status({ type: 'channel-lost', error: new Error('gone') })
      expect(reported).toEqual([])
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
      mq.resumeConsuming()
      await run()
      expect(transport.subscriptions).toHaveLength(2)
      expect(await consumersDetails()).toMatchObject({ status: 'UP' })
    })

    it('lets go heldTimeout after its first delivery when it started while consuming was paused', async () => {
      mq.pauseConsuming()
      const { handled } = await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      const sub = transport.current
      await run(5_000)
      const held = sub.deliver(new ManualDelivery('held'))
      expect(mq.held).toBe(1)
      await run(9_999)
      expect(held.settlements).toEqual([])
      await run(1)
      expect(held.settlements).toEqual(['requeue'])
      expect(sub.cancels).toBe(1)
      expect(handled).toEqual([])
    })

    it('takes the deliveries of the new subscription that arrive while it is still being made', async () => {
      const { handled } = await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      mq.pauseConsuming()
      await run(10_000)
      let early: ManualDelivery | undefined
      transport.onSubscribe = (subscription) => {
        early = subscription.deliver(new ManualDelivery('early'))
      }
      mq.resumeConsuming()
      await run()
      expect(early?.settlements).toEqual(['ack'])
      expect(handled).toEqual(['early'])
    })

    it('closes while it is subscribing again after a pause, and tries no more', async () => {
      const { consumer } = await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      mq.pauseConsuming()
      await run(10_000)
      transport.failConsumes = 10
      mq.resumeConsuming()
      await run(1_500)
      expect(reported).toHaveLength(2)
      await expect(consumer.close()).resolves.toBeUndefined()
      await run(60_000)
      expect(reported).toHaveLength(2)
      expect(transport.failConsumes).toBe(8)
      expect(transport.subscriptions).toHaveLength(1)
    })

    it('cancels and closes a subscription that was made again only after the consumer closed', async () => {
      const { consumer, handled } = await consume(ConsumerOptions.defaults().withHeldTimeout('10s'))
      mq.pauseConsuming()
      await run(10_000)
      const slowSubscribe = gate()
      transport.consumeGate = slowSubscribe.wait
      mq.resumeConsuming()
      await run()
      const closing = consumer.close()
      await run()
      expect(await settled(closing)).toBe(true)
      slowSubscribe.open()
      await run()
      expect(transport.subscriptions).toHaveLength(2)
      const late = transport.current
      expect(late.cancels).toBe(1)
      // Its channel too, not left open until the connection closes.
      expect(late.closes).toBe(1)
      expect(late.deliver(new ManualDelivery('too-late')).settlements).toEqual(['requeue'])
      expect(handled).toEqual([])
      expect(reported).toEqual([])
    })
  })

  describe('closing', () => {
    it('hands the held deliveries back at once and any delivery arriving afterwards', async () => {
      const { consumer, handled } = await consume(ConsumerOptions.defaults())
      mq.pauseConsuming()
      const sub = transport.current
      const held = [sub.deliver(new ManualDelivery('a')), sub.deliver(new ManualDelivery('b'))]
      await consumer.close()
      expect(held.map((d) => d.settlements)).toEqual([['requeue'], ['requeue']])
      expect(mq.held).toBe(0)
      expect(sub.cancels).toBe(1)
      expect(sub.closes).toBe(1)
      expect(sub.deliver(new ManualDelivery('after')).settlements).toEqual(['requeue'])
      expect(handled).toEqual([])
    })

    it('by `await using` closes the consumer', async () => {
      const { consumer } = await consume(ConsumerOptions.defaults())
      const sub = transport.current
      await consumer[Symbol.asyncDispose]()
      expect(sub.cancels).toBe(1)
      expect(sub.closes).toBe(1)
      expect(sub.deliver(new ManualDelivery('after')).settlements).toEqual(['requeue'])
    })

    it('gives a handler that waits inside a drain what is left of the drain time, without aborting it', async () => {
      await mq.applyTopology(Topology.define().queueWithDeadLetter('other'))
      await mq.consume(
        'other',
        ConsumerOptions.defaults(),
        () => new Promise<void>(() => undefined),
      )
      const otherSub = transport.current
      let aborted = false
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), async (_m, { signal }) => {
        signal.addEventListener('abort', () => (aborted = true))
        await new Promise((resolve) => setTimeout(resolve, 1_000))
        // Waits for the other consumer's handler, which never finishes.
        await mq.drainConsumers('1h')
      })
      const sub = transport.current
      otherSub.deliver(new ManualDelivery('stuck', { queue: 'other' }))
      const waiter = sub.deliver(new ManualDelivery('waiter'))
      await run()
      const closing = consumer.close({ drainTimeout: '10s' })
      await run(9_999)
      expect(await settled(closing)).toBe(false)
      expect(sub.closes).toBe(0)
      await run(1)
      expect(await settled(closing)).toBe(true)
      expect(aborted).toBe(false)
      expect(sub.closes).toBe(1)
      expect(waiter.settlements).toEqual([])
    })

    it('with no drain time aborts at once the signal of a handler still running, even one about to finish', async () => {
      let abortedAtEnd: boolean | undefined
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), async (_m, { signal }) => {
        await new Promise((resolve) => setTimeout(resolve, 0))
        abortedAtEnd = signal.aborted
      })
      const delivery = transport.current.deliver(new ManualDelivery('soon'))
      const closing = consumer.close({ drainTimeout: 0 })
      await run()
      expect(abortedAtEnd).toBe(true)
      expect(await settled(closing)).toBe(true)
      expect(delivery.settlements).toEqual(['ack'])
    })

    it('with no drain time leaves alone the signal of a handler waiting inside a drain, and gives it the 5 s grace', async () => {
      await mq.applyTopology(Topology.define().queueWithDeadLetter('other'))
      await mq.consume(
        'other',
        ConsumerOptions.defaults(),
        () => new Promise<void>(() => undefined),
      )
      const otherSub = transport.current
      let aborted = false
      const consumer = await mq.consume('q', ConsumerOptions.defaults(), async (_m, { signal }) => {
        signal.addEventListener('abort', () => (aborted = true))
        await mq.drainConsumers('1h')
      })
      const sub = transport.current
      otherSub.deliver(new ManualDelivery('stuck', { queue: 'other' }))
      sub.deliver(new ManualDelivery('waiter'))
      await run()
      const closing = consumer.close({ drainTimeout: 0 })
      await run(4_999)
      expect(await settled(closing)).toBe(false)
      expect(aborted).toBe(false)
      await run(1)
      expect(await settled(closing)).toBe(true)
      expect(aborted).toBe(false)
      expect(sub.closes).toBe(1)
    })

    it('refuses a drain timeout that is no duration, naming it', async () => {
      const { consumer } = await consume(ConsumerOptions.defaults())
      expect(() => consumer.close({ drainTimeout: 'soon' as '1s' })).toThrow(ConfigurationError)
      expect(() => consumer.close({ drainTimeout: -1 })).toThrow(/^drainTimeout must be/)
    })

    it('from its own handler closes the channel once that handler has settled', async () => {
      const after = gate()
      const consumer: Consumer = await mq.consume('q', ConsumerOptions.defaults(), async () => {
        await consumer.close()
        await after.wait
      })
      const sub = transport.current
      const delivery = sub.deliver(new ManualDelivery('closer'))
      await run()
      expect(sub.cancels).toBe(1)
      expect(sub.closes).toBe(0)
      expect(mq.inFlight).toBe(1)
      after.open()
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(sub.closes).toBe(1)
    })

    it('from two of its own handlers closes the channel only once both have settled', async () => {
      const consumer: Consumer = await mq.consume(
        'q',
        ConsumerOptions.defaults().withConcurrency(2),
        async (message) => {
          // Both are running before either closes.
          await new Promise((resolve) => setTimeout(resolve, 0))
          await consumer.close()
          if (message.envelope.id === 'slow')
            await new Promise((resolve) => setTimeout(resolve, 1_000))
        },
      )
      const sub = transport.current
      const quick = sub.deliver(new ManualDelivery('quick'))
      const slow = sub.deliver(new ManualDelivery('slow'))
      await run()
      expect(quick.settlements).toEqual(['ack'])
      expect(sub.closes).toBe(0)
      await run(1_000)
      expect(slow.settlements).toEqual(['ack'])
      expect(sub.closes).toBe(1)
    })

    it('from its own handler, not awaited, closes the channel once the close is done', async () => {
      const consumer: Consumer = await mq.consume('q', ConsumerOptions.defaults(), () => {
        void consumer.close()
      })
      const sub = transport.current
      const delivery = sub.deliver(new ManualDelivery('closer'))
      await run()
      expect(delivery.settlements).toEqual(['ack'])
      expect(sub.cancels).toBe(1)
      expect(sub.closes).toBe(1)
    })

    it('from its own handler leaves that handler to the connection’s drains once the close has answered', async () => {
      let closedAt: number | undefined
      const consumer: Consumer = await mq.consume('q', ConsumerOptions.defaults(), async () => {
        await consumer.close()
        closedAt = Date.now()
        await new Promise((resolve) => setTimeout(resolve, 1_000))
      })
      const delivery = transport.current.deliver(new ManualDelivery('closer'))
      await run()
      expect(closedAt).toBeDefined()
      const drain = mq.drainConsumers('10s')
      await run(999)
      expect(await settled(drain)).toBe(false)
      await run(1)
      await expect(drain).resolves.toBe(true)
      expect(delivery.settlements).toEqual(['ack'])
    })
  })
})
