import { describe, expect, test } from 'vitest'
import { ConfigurationError } from '../../src/errors.js'
import {
  deadLetterQueueName,
  parkedQueueName,
  rungArguments,
  rungQueueName,
  validateQueueName,
} from '../../src/retry/queue-names.js'

describe('the derived queue names', () => {
  test('dead-letter, parked and rung queues hang off the source queue', () => {
    expect(deadLetterQueueName('orders.new')).toBe('orders.new.dlq')
    expect(parkedQueueName('orders.new')).toBe('orders.new.parked')
    expect(rungQueueName('orders.new', 40_000)).toBe('orders.new.retry.40s')
    expect(rungQueueName('orders.new', 160_000)).toBe('orders.new.retry.160s')
    expect(rungQueueName('orders.new', 86_400_000)).toBe('orders.new.retry.24h')
  })

  // Java's rendering (pinned by the fixture); Go, Python and Ruby say `.retry.0s` for this.
  test('a sub-second rung is named in milliseconds', () => {
    expect(rungQueueName('orders.new', 500)).toBe('orders.new.retry.500ms')
  })

  test('rung arguments are exactly the TTL and the way back', () => {
    expect(rungArguments('orders.new', 40_000)).toStrictEqual({
      'x-message-ttl': 40_000,
      'x-dead-letter-exchange': 'acemq.retry',
      'x-dead-letter-routing-key': 'orders.new',
    })
  })

  test.each([0, -1000, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
    'a rung for a %s ms wait is refused',
    (delay) => {
      expect(() => rungQueueName('orders.new', delay)).toThrow(ConfigurationError)
      expect(() => rungArguments('orders.new', delay)).toThrow(
        new RegExp(
          `^delayMs must be a whole number of milliseconds, at least 1.*got ${String(delay)}$`,
        ),
      )
    },
  )

  test('a name with room for its own length but not its suffix is refused when the suffix is added', () => {
    const longest = 'q'.repeat(255)
    expect(validateQueueName(longest)).toBe(longest)
    expect(() => deadLetterQueueName(longest)).toThrow(/too long to carry its '\.dlq' queue/)
    expect(() => rungQueueName('q'.repeat(245), 160_000)).toThrow(
      /'\.retry\.160s' makes it 256 bytes/,
    )
    expect(parkedQueueName('q'.repeat(248))).toHaveLength(255)
  })
})

describe('validateQueueName', () => {
  test('returns a good name unchanged', () => {
    expect(validateQueueName('orders.placed')).toBe('orders.placed')
    expect(validateQueueName('订单')).toBe('订单')
  })

  test.each<[string, unknown, RegExp]>([
    ['an empty name', '', /^queue must be a non-empty queue name; got ''$/],
    ['a name that is not a string', 42, /^queue must be a non-empty queue name; got 42$/],
    ['undefined', undefined, /got undefined$/],
    [
      'a control character',
      'orders\nnew',
      /^queue must not contain control characters; got "orders\\nnew"$/,
    ],
    ['a NUL', 'a\u0000b', /control characters/],
    ['DEL', 'a\u007fb', /control characters/],
    [
      'more than 255 bytes',
      'q'.repeat(256),
      /^queue is 256 bytes in UTF-8, over RabbitMQ's 255-byte limit/,
    ],
    ['more than 255 bytes of UTF-8 in fewer characters', 'é'.repeat(128), /is 256 bytes in UTF-8/],
    ["RabbitMQ's reserved amq. prefix", 'amq.orders', /must not start with 'amq\.'/],
  ])('refuses %s', (_name, queue, message) => {
    expect(() => validateQueueName(queue as string)).toThrow(ConfigurationError)
    expect(() => validateQueueName(queue as string)).toThrow(message)
  })

  test('names the argument it checks', () => {
    expect(() => validateQueueName('', 'options.queue')).toThrow(/^options\.queue must be/)
  })

  test('the derived names check the source name too', () => {
    expect(() => deadLetterQueueName('')).toThrow(ConfigurationError)
    expect(() => rungArguments('', 1000)).toThrow(ConfigurationError)
  })
})
