import { describe, expect, test } from 'vitest'
import {
  MAX_BROKER_WAIT,
  deadLetterQueueName,
  rungArguments,
  rungQueueName,
  validateQueueName,
} from '../../src/retry/queue-names.js'
import { RetryPolicy } from '../../src/retry/retry-policy.js'

// What a refusal says, word for word where the words carry the remedy, and the edges of what is
// accepted (found by mutation testing, docs/mutation.md).

describe('queue names', () => {
  test('a name over 255 bytes is refused, showing its first 40 characters', () => {
    const name = `${'a'.repeat(40)}${'b'.repeat(260)}`
    expect(() => validateQueueName(name)).toThrow(
      `queue is 300 bytes in UTF-8, over RabbitMQ's 255-byte limit; got '${'a'.repeat(40)}…'`,
    )
  })

  test('a name too long to carry its suffix is refused, showing its first 40 characters', () => {
    const name = `${'a'.repeat(40)}${'b'.repeat(212)}`
    expect(() => deadLetterQueueName(name)).toThrow(
      `queue '${'a'.repeat(40)}…' is too long to carry its '.dlq' queue: '.dlq' makes it 256 bytes`,
    )
  })

  test('the shortest rung, 1 ms, is named and declared', () => {
    expect(rungQueueName('orders.new', 1)).toBe('orders.new.retry.1ms')
    expect(rungArguments('orders.new', 1)['x-message-ttl']).toBe(1)
  })
})

describe('a policy refused for a broker wait over ten years', () => {
  test('a wait that renders only in milliseconds is not shown twice', () => {
    expect(() => RetryPolicy.fixed(2, MAX_BROKER_WAIT + 1)).toThrow(
      `RetryPolicy fixed(2, 315360000001ms): the wait after attempt 1 is 315360000001 ms, which would sit on the rung queue '{queue}.retry.315360000001ms', but`,
    )
  })

  test('an initial delay over the limit is told to be shorter', () => {
    expect(() => RetryPolicy.exponential(2, MAX_BROKER_WAIT + 1)).toThrow(
      /ten years\); use a shorter initial delay$/,
    )
  })

  test('an initial delay of exactly the limit is told to give a cap, without an example', () => {
    expect(() => RetryPolicy.exponential(3, MAX_BROKER_WAIT)).toThrow(
      /the wait after attempt 2 is 630720000000 ms .*ten years\); give a cap of at most that, or fewer attempts$/,
    )
  })

  test('an initial delay of a day gets an example with a cap of a day', () => {
    expect(() => RetryPolicy.exponential(60, '1d')).toThrow(
      /ten years\); give a cap of at most that, such as exponential\(60, 24h, 1d\), or fewer attempts$/,
    )
  })

  test('an initial delay over a day gets no example', () => {
    expect(() => RetryPolicy.exponential(60, '2d')).toThrow(
      /ten years\); give a cap of at most that, or fewer attempts$/,
    )
  })
})

test('a zero delay stays zero however many attempts, never NaN', () => {
  expect(RetryPolicy.exponential(3, 0).delayAfter(5_000)).toBe(0)
  expect(RetryPolicy.exponential(3, 0).waitInBrokerFrom(0).nextWait(2, 0)).toStrictEqual({
    delayMs: 1,
    inBroker: false,
  })
})
