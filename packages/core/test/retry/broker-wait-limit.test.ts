import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { ConfigurationError } from '../../src/errors.js'
import { MAX_BROKER_WAIT, rungArguments, rungQueueName } from '../../src/retry/queue-names.js'
import { RetryPolicy } from '../../src/retry/retry-policy.js'
import { Topology } from '../../src/topology/topology.js'

const DAY = 86_400_000

describe('the longest wait a rung queue can hold', () => {
  test("is RabbitMQ's limit for x-message-ttl and expiration: ten years of 365 days", () => {
    expect(MAX_BROKER_WAIT).toBe(10 * 365 * 86_400_000)
  })

  test('a rung of exactly the limit is named and declared', () => {
    expect(rungQueueName('orders.new', MAX_BROKER_WAIT)).toBe('orders.new.retry.87600h')
    expect(rungArguments('orders.new', MAX_BROKER_WAIT)['x-message-ttl']).toBe(MAX_BROKER_WAIT)
  })

  test('a rung over the limit is refused, naming the delay and the limit', () => {
    const over = MAX_BROKER_WAIT + 1
    expect(() => rungQueueName('orders.new', over)).toThrow(ConfigurationError)
    expect(() => rungArguments('orders.new', over)).toThrow(
      /^delayMs must be .*at most 315360000000 \(RabbitMQ's largest message TTL\).*got 315360000001$/,
    )
  })
})

describe('a policy whose broker waits exceed what RabbitMQ accepts', () => {
  test('exponential(60, 30s) without a cap is refused when it is built', () => {
    expect(() => RetryPolicy.exponential(60, '30s')).toThrow(ConfigurationError)
  })

  test('the refusal names the policy, the attempt, the rung delay and says to give a cap', () => {
    // 30 s × 2^24 = 503 316 480 000 ms after attempt 25 is the first wait over ten years.
    expect(() => RetryPolicy.exponential(60, '30s')).toThrow(
      "RetryPolicy exponential(60, 30s): the wait after attempt 25 is 503316480000 ms (8388608m), which would sit on the rung queue '{queue}.retry.8388608m', but RabbitMQ refuses a message TTL over 315360000000 ms (ten years); give a cap of at most that, such as exponential(60, 30s, 1d), or fewer attempts",
    )
  })

  test('nothing is declared: the topology that would carry it cannot even be asked for', () => {
    let topology: Topology | undefined
    expect(() => {
      topology = Topology.define().queueWithRetry('orders.new', RetryPolicy.exponential(60, '30s'))
    }).toThrow(ConfigurationError)
    expect(topology).toBeUndefined()
  })

  test('a cap over the limit is refused too', () => {
    expect(() => RetryPolicy.exponential(20, '1d', '3651d')).toThrow(
      /the wait after attempt 13 is 315446400000 ms \(87624h\).*give a cap of at most that$/,
    )
  })

  test('fixed(n, d) with d over the limit is refused, saying to use a shorter delay', () => {
    expect(() => RetryPolicy.fixed(3, '3651d')).toThrow(
      /^RetryPolicy fixed\(3, 87624h\): the wait after attempt 1 is 315446400000 ms \(87624h\).*use a shorter delay$/,
    )
  })

  test('a policy whose longest rung is exactly the limit is allowed', () => {
    expect(RetryPolicy.fixed(2, MAX_BROKER_WAIT).brokerRungs()).toStrictEqual([MAX_BROKER_WAIT])
    expect(RetryPolicy.exponential(60, '30s', MAX_BROKER_WAIT).brokerRungs().at(-1)).toBe(
      MAX_BROKER_WAIT,
    )
    expect(() => RetryPolicy.fixed(2, MAX_BROKER_WAIT + 1)).toThrow(ConfigurationError)
  })

  test('an uncapped policy whose attempts run out before the limit is allowed', () => {
    // 30 s × 2^23 = 251 658 240 000 ms: the last wait of exponential(25, 30s) still fits.
    expect(RetryPolicy.exponential(25, '30s').brokerRungs().at(-1)).toBe(251_658_240_000)
    expect(() => RetryPolicy.exponential(26, '30s')).toThrow(/after attempt 25 /)
  })

  test('is refused at the factory, before a later waitInBrokerFrom(0) could keep its waits in the consumer', () => {
    // RabbitMQ closes a channel that holds a delivery unacked for its consumer timeout (30 min
    // by default), so a wait this long belongs in the broker, under a cap.
    expect(() => RetryPolicy.fixed(3, '3651d').waitInBrokerFrom(0)).toThrow(ConfigurationError)
  })

  test('every policy that builds has rungs RabbitMQ accepts; the rest are refused', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.integer({ min: 1, max: 80 }),
        fc.integer({ min: 0, max: 100 * DAY }),
        fc.option(fc.integer({ min: 0, max: 4000 * DAY })),
        fc.integer({ min: 0, max: 4000 * DAY }),
        (exponential, attempts, initial, capExtra, threshold) => {
          let policy: RetryPolicy
          try {
            const base = exponential
              ? RetryPolicy.exponential(
                  attempts,
                  initial,
                  capExtra === null ? undefined : initial + capExtra,
                )
              : RetryPolicy.fixed(attempts, initial)
            policy = base.waitInBrokerFrom(threshold)
          } catch (error) {
            expect(error).toBeInstanceOf(ConfigurationError)
            expect(String(error)).toMatch(/RabbitMQ refuses a message TTL over 315360000000 ms/)
            return
          }
          for (const rung of policy.brokerRungs()) {
            expect(rung).toBeLessThanOrEqual(MAX_BROKER_WAIT)
            expect(rungArguments('orders.new', rung)['x-message-ttl']).toBe(rung)
          }
        },
      ),
    )
  })
})
