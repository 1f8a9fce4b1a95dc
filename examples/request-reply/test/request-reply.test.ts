import { describe, it } from 'vitest'
import { AMQP_URL, requireRabbit, uniqueName } from '@acemq/testing'
import { LOCK_WAIT_TIMEOUT, withoutBrokerFaults } from '../../test-support/broker-lock.js'
import { expectLinesInOrder } from '../../test-support/expect-lines.js'
import { expectRepeatable } from '../../test-support/repeatable.js'

const hasRabbit = await requireRabbit()

describe.runIf(hasRabbit)('the request-reply example', () => {
  it(
    'prices two quotes, gets an error reply, a timeout and an unroutable request, counts them, and runs again the same way leaving no queue behind',
    async () => {
      const pricing = uniqueName('examples.pricing')
      const output = await withoutBrokerFaults(() =>
        expectRepeatable(
          'request-reply',
          { AMQP_URL, PRICING: pricing },
          { queues: [pricing, `${pricing}.dlq`, `${pricing}.parked`] },
        ),
      )
      expectLinesInOrder(output, [
        /^responder: answering on examples\.pricing\..+$/,
        /^3 x lamp: 120$/,
        /^2 x chair: 240$/,
        /^1 x sofa: ResponderError: the responder could not answer request .+: FatalError: no price for sofa$/,
        /^1 x slow: RequestTimeoutError: no reply to request .+ within 200 ms$/,
        /^1 x lamp: UnroutableError: .*NO_ROUTE.*$/,
        /^requester: 2 answered, 1 timed out, 1 unmatched, 2 failed$/,
        /^responder: 4 answered, 0 unanswerable$/,
        /^removed examples\.pricing\..+, its \.dlq and \.parked, and the reply queue$/,
      ])
    },
    LOCK_WAIT_TIMEOUT + 60_000,
  )
})
