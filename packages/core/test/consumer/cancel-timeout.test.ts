import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  AceMq,
  ConsumerOptions,
  ErrorCodes,
  InMemoryTransport,
  Topology,
  errorCodeOf,
} from '../../src/index.js'
import {
  type Delivery,
  type TransportConsumeOptions,
  type TransportSubscription,
} from '../../src/spi.js'

/** A broker whose `basic.cancel` is never answered; closing the channel still works. */
class CancelNeverAnswers extends InMemoryTransport {
  override async consume(
    queue: string,
    options: TransportConsumeOptions,
    onDelivery: (delivery: Delivery) => void,
  ): Promise<TransportSubscription> {
    const inner = await super.consume(queue, options, onDelivery)
    return {
      cancel: () => new Promise<void>(() => undefined),
      close: () => inner.close(),
    }
  }
}

describe('a subscription whose cancel is never answered', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('closes the consumer after 5 s anyway, reporting ACEMQ_CANCEL_TIMEOUT', async () => {
    const reported: { error: unknown; context: string }[] = []
    const mq = await AceMq.connect(new CancelNeverAnswers(), {
      onError: (error, context) => reported.push({ error, context }),
    })
    try {
      await mq.applyTopology(Topology.define().queue('hung-cancel'))
      const consumer = await mq.consume('hung-cancel', ConsumerOptions.defaults(), () => undefined)
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
      let closed = false
      const closing = consumer.close().then(() => {
        closed = true
      })
      await vi.advanceTimersByTimeAsync(4_999)
      expect(closed).toBe(false)
      expect(reported).toEqual([])
      await vi.advanceTimersByTimeAsync(1)
      await closing
      expect(reported).toHaveLength(1)
      expect(errorCodeOf(reported[0]?.error)).toBe(ErrorCodes.CANCEL_TIMEOUT)
      expect((reported[0]?.error as Error).message).toBe(
        "cancelling the subscription to 'hung-cancel' took over 5 s",
      )
      expect(reported[0]?.context).toBe("closing the channel of 'hung-cancel' instead")
    } finally {
      vi.useRealTimers()
      await mq.close({ drainTimeout: 0 })
    }
  })
})
