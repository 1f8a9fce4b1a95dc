import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { DEFAULT_BROKER_WAIT_THRESHOLD } from '../../src/constants.js'
import { ConfigurationError } from '../../src/errors.js'
import { RetryPolicy } from '../../src/retry/retry-policy.js'

const DAY = 86_400_000

describe('the factories', () => {
  test('none() is one attempt and no jitter', () => {
    const policy = RetryPolicy.none()
    expect([policy.maxAttempts, policy.jitter, policy.maxAgeMs]).toStrictEqual([1, 0, 0])
    expect(policy.schedule()).toStrictEqual([])
    expect(policy.brokerRungs()).toStrictEqual([])
    expect(policy.nextWait(1, 0)).toBeNull()
    expect(policy.giveUpReason(1, 0)).toBe('gave up after 1 attempt(s)')
  })

  test('fixed(n, d) repeats the delay without jitter', () => {
    const policy = RetryPolicy.fixed(3, '5s')
    expect(policy).toMatchObject({
      maxAttempts: 3,
      initialDelayMs: 5_000,
      multiplier: 1,
      maxDelayMs: undefined,
      jitter: 0,
      maxAgeMs: 0,
      brokerWaitThresholdMs: DEFAULT_BROKER_WAIT_THRESHOLD,
    })
    expect(policy.schedule()).toStrictEqual([5_000, 5_000])
  })

  test('exponential(n, d, cap) doubles up to the cap with ±20% jitter', () => {
    const policy = RetryPolicy.exponential(5, '1s', '5s')
    expect(policy).toMatchObject({ multiplier: 2, jitter: 0.2, maxDelayMs: 5_000 })
    expect(policy.schedule()).toStrictEqual([1_000, 2_000, 4_000, 5_000])
  })

  test('exponential without a cap keeps doubling', () => {
    expect(RetryPolicy.exponential(6, 250).schedule()).toStrictEqual([
      250, 500, 1_000, 2_000, 4_000,
    ])
  })

  test('a cap equal to the first delay is a fixed schedule with jitter', () => {
    expect(RetryPolicy.exponential(4, '2s', '2s').schedule()).toStrictEqual([2_000, 2_000, 2_000])
  })

  test('a zero delay is allowed, and its consumer waits are floored at 1 ms', () => {
    const policy = RetryPolicy.fixed(3, 0)
    expect(policy.schedule()).toStrictEqual([0, 0])
    expect(policy.nextWait(1, 0)).toStrictEqual({ delayMs: 1, inBroker: false })
  })

  test('there is no age limit unless one is asked for', () => {
    const policy = RetryPolicy.exponential(5, '1s', '1m')
    expect(policy.maxAgeMs).toBe(0)
    expect(policy.nextWait(1, 10 * 365 * DAY)).not.toBeNull()
  })

  test.each<[string, () => RetryPolicy, RegExp]>([
    [
      'zero attempts',
      () => RetryPolicy.fixed(0, '1s'),
      /^maxAttempts must be a whole number from 1 to 2147483647; got 0$/,
    ],
    ['fractional attempts', () => RetryPolicy.exponential(2.5, '1s'), /^maxAttempts .*got 2\.5$/],
    ['NaN attempts', () => RetryPolicy.fixed(Number.NaN, '1s'), /^maxAttempts .*got NaN$/],
    [
      'more attempts than the header holds',
      () => RetryPolicy.fixed(2 ** 31, '1s'),
      /^maxAttempts .*got 2147483648$/,
    ],
    ['a negative delay', () => RetryPolicy.fixed(3, -1), /^delay must be .*got -1$/],
    [
      'a delay with an unknown unit',
      () => RetryPolicy.fixed(3, '5x' as '5s'),
      /^delay must be .*got "5x"$/,
    ],
    [
      'a negative first delay',
      () => RetryPolicy.exponential(3, '-1s' as '1s'),
      /^initialDelay must be .*got "-1s"$/,
    ],
    [
      'an infinite cap',
      () => RetryPolicy.exponential(3, '1s', Number.POSITIVE_INFINITY),
      /^maxDelay must be .*got Infinity$/,
    ],
    [
      'a cap below the first delay',
      () => RetryPolicy.exponential(3, '1s', '500ms'),
      /^maxDelay \(500ms\) must be at least initialDelay \(1s\)$/,
    ],
  ])('refuses %s, naming the argument and value', (_name, build, message) => {
    expect(build).toThrow(ConfigurationError)
    expect(build).toThrow(message)
  })
})

describe('the modifiers', () => {
  const base = RetryPolicy.exponential(5, '1s', '1m')

  test('every policy is frozen', () => {
    expect(Object.isFrozen(base)).toBe(true)
    expect(Object.isFrozen(RetryPolicy.none())).toBe(true)
    expect(Object.isFrozen(base.giveUpAfter('6h'))).toBe(true)
    expect(Object.isFrozen(base.withJitter(0.5))).toBe(true)
    expect(Object.isFrozen(base.waitInBrokerFrom('1m'))).toBe(true)
  })

  test('each returns a new policy and leaves the original alone', () => {
    const changed = base.giveUpAfter('6h').withJitter(0.3).waitInBrokerFrom('1m')
    expect(changed).not.toBe(base)
    expect(changed).toMatchObject({
      maxAgeMs: 21_600_000,
      jitter: 0.3,
      brokerWaitThresholdMs: 60_000,
    })
    expect(base).toMatchObject({ maxAgeMs: 0, jitter: 0.2, brokerWaitThresholdMs: 30_000 })
    expect(changed.schedule()).toStrictEqual(base.schedule())
  })

  test('giveUpAfter(0) means never', () => {
    expect(
      base
        .giveUpAfter('6h')
        .giveUpAfter(0)
        .nextWait(1, 100 * 365 * DAY),
    ).not.toBeNull()
  })

  test('waitInBrokerFrom(0) keeps every wait in the consumer', () => {
    const policy = RetryPolicy.fixed(3, '10m').waitInBrokerFrom(0)
    expect(policy.brokerRungs()).toStrictEqual([])
    expect(policy.nextWait(1, 0)).toStrictEqual({ delayMs: 600_000, inBroker: false })
  })

  test('withJitter accepts 0 and 1', () => {
    expect(base.withJitter(0).jitter).toBe(0)
    expect(base.withJitter(1).jitter).toBe(1)
  })

  test.each([-0.1, 1.01, Number.NaN, Number.POSITIVE_INFINITY])(
    'withJitter refuses %s, naming the factor',
    (factor) => {
      expect(() => base.withJitter(factor)).toThrow(ConfigurationError)
      expect(() => base.withJitter(factor)).toThrow(
        new RegExp(`^factor must be a number from 0 to 1 .*got ${String(factor)}$`),
      )
    },
  )

  test('giveUpAfter and waitInBrokerFrom refuse bad durations, naming the argument', () => {
    expect(() => base.giveUpAfter(-1)).toThrow(/^age must be .*got -1$/)
    expect(() => base.waitInBrokerFrom('soon' as '1s')).toThrow(/^threshold must be .*got "soon"$/)
  })
})

describe('delays and decisions', () => {
  test('delayAfter is d × multiplier^(attempt − 1), capped', () => {
    const policy = RetryPolicy.exponential(10, '1s', '5s')
    expect([1, 2, 3, 4, 5].map((a) => policy.delayAfter(a))).toStrictEqual([
      1_000, 2_000, 4_000, 5_000, 5_000,
    ])
  })

  test('brokerRungs lists each broker delay once, in order', () => {
    const policy = RetryPolicy.exponential(8, '10s', '1m')
    expect(policy.schedule()).toStrictEqual([
      10_000, 20_000, 40_000, 60_000, 60_000, 60_000, 60_000,
    ])
    expect(policy.brokerRungs()).toStrictEqual([40_000, 60_000])
  })

  test('brokerRungs answers at once for the largest number of attempts', () => {
    const policy = RetryPolicy.exponential(2 ** 31 - 1, '1s', '1h')
    const started = performance.now()
    expect(policy.brokerRungs()).toStrictEqual([
      32_000, 64_000, 128_000, 256_000, 512_000, 1_024_000, 2_048_000, 3_600_000,
    ])
    // Walking all 2^31 − 1 attempts would take minutes; the margin holds on a loaded machine.
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  test('a broker wait is exact and a consumer wait is jittered', () => {
    const policy = RetryPolicy.exponential(6, '10s', '5m')
    expect(policy.nextWait(3, 0, () => 0)).toStrictEqual({ delayMs: 40_000, inBroker: true })
    expect(policy.nextWait(1, 0, () => 0)).toStrictEqual({ delayMs: 8_000, inBroker: false })
    expect(policy.nextWait(1, 0, () => 0.5)).toStrictEqual({ delayMs: 10_000, inBroker: false })
  })

  test('the broker decision is made on the unjittered delay', () => {
    // 29 999 ms jittered up to 35 998 ms is still a consumer wait, so it never names a rung.
    const policy = RetryPolicy.fixed(2, 29_999).withJitter(0.2)
    expect(policy.nextWait(1, 0, () => 1 - Number.EPSILON)).toStrictEqual({
      delayMs: 35_998,
      inBroker: false,
    })
  })

  test('uses Math.random when no random source is given', () => {
    const wait = RetryPolicy.exponential(3, '1s').nextWait(1, 0)
    expect(wait?.inBroker).toBe(false)
    expect(wait?.delayMs).toBeGreaterThanOrEqual(800)
    expect(wait?.delayMs).toBeLessThanOrEqual(1_200)
  })

  test('a random source out of range cannot push a wait out of bounds', () => {
    const policy = RetryPolicy.exponential(3, '1s')
    expect(policy.nextWait(1, 0, () => 7)?.delayMs).toBe(1_200)
    expect(policy.nextWait(1, 0, () => -3)?.delayMs).toBe(800)
    expect(policy.nextWait(1, 0, () => Number.NaN)?.delayMs).toBe(1_000)
  })

  test('gives up when attempts run out, saying how many there were', () => {
    const policy = RetryPolicy.fixed(3, '1s')
    expect(policy.giveUpReason(2, 0)).toBeUndefined()
    expect(policy.giveUpReason(3, 0)).toBe('gave up after 3 attempt(s)')
    expect(policy.giveUpReason(7, 0)).toBe('gave up after 7 attempt(s)')
    expect(policy.nextWait(3, 0)).toBeNull()
  })

  test('gives up on a message that has reached the age limit, not before', () => {
    const policy = RetryPolicy.fixed(10, '1s').giveUpAfter('6h')
    expect(policy.giveUpReason(1, 21_599_999)).toBeUndefined()
    expect(policy.giveUpReason(1, 21_600_000)).toBe('gave up on a message older than 6h')
    expect(policy.nextWait(1, 21_600_000)).toBeNull()
  })

  test('running out of attempts is the reason given when both apply', () => {
    expect(RetryPolicy.fixed(2, '1s').giveUpAfter('1m').giveUpReason(2, 120_000)).toBe(
      'gave up after 2 attempt(s)',
    )
  })

  test('a negative age (a first-seen from a fast clock) counts as 0', () => {
    expect(RetryPolicy.fixed(3, '1s').giveUpAfter('1m').nextWait(1, -5_000)).not.toBeNull()
  })

  test.each<[string, () => unknown, RegExp]>([
    [
      'delayAfter(0)',
      () => RetryPolicy.fixed(3, '1s').delayAfter(0),
      /^attempt must be a whole number of at least 1 .*got 0$/,
    ],
    ['delayAfter(1.5)', () => RetryPolicy.fixed(3, '1s').delayAfter(1.5), /^attempt .*got 1\.5$/],
    ['nextWait(-1, 0)', () => RetryPolicy.fixed(3, '1s').nextWait(-1, 0), /^attempt .*got -1$/],
    [
      'giveUpReason(NaN, 0)',
      () => RetryPolicy.fixed(3, '1s').giveUpReason(Number.NaN, 0),
      /^attempt .*got NaN$/,
    ],
    [
      'nextWait(1, NaN)',
      () => RetryPolicy.fixed(3, '1s').nextWait(1, Number.NaN),
      /^ageMs must be a number of milliseconds; got NaN$/,
    ],
  ])('%s is refused, naming the argument', (_name, call, message) => {
    expect(call).toThrow(ConfigurationError)
    expect(call).toThrow(message)
  })
})

describe('toString', () => {
  test.each<[RetryPolicy, string]>([
    [RetryPolicy.none(), 'none()'],
    [RetryPolicy.fixed(4, '30s'), 'fixed(4, 30s)'],
    [RetryPolicy.exponential(5, '1s', '1m'), 'exponential(5, 1s, 1m)'],
    [RetryPolicy.exponential(5, 1_500), 'exponential(5, 1500ms)'],
    [
      RetryPolicy.exponential(5, '1s', '1m').giveUpAfter('6h'),
      'exponential(5, 1s, 1m).giveUpAfter(6h)',
    ],
    [RetryPolicy.exponential(5, '1s').withJitter(0.3), 'exponential(5, 1s).withJitter(0.3)'],
    [RetryPolicy.fixed(2, '1s').waitInBrokerFrom(0), 'fixed(2, 1s).waitInBrokerFrom(0ms)'],
    [
      RetryPolicy.exponential(5, '1s').withJitter(0.2).waitInBrokerFrom('30s'),
      'exponential(5, 1s)',
    ],
  ])('renders %s as the code that builds it', (policy, expected) => {
    expect(String(policy)).toBe(expected)
  })
})

describe('properties', () => {
  const policies = fc
    .record({
      exponential: fc.boolean(),
      maxAttempts: fc.integer({ min: 1, max: 40 }),
      initial: fc.integer({ min: 0, max: 3_600_000 }),
      capExtra: fc.option(fc.integer({ min: 0, max: 10 * DAY })),
      jitter: fc.double({ min: 0, max: 1, noNaN: true }),
      threshold: fc.integer({ min: 0, max: 600_000 }),
      maxAge: fc.integer({ min: 0, max: 30 * DAY }),
    })
    .map((p) => {
      try {
        const base = p.exponential
          ? RetryPolicy.exponential(
              p.maxAttempts,
              p.initial,
              p.capExtra === null ? undefined : p.initial + p.capExtra,
            )
          : RetryPolicy.fixed(p.maxAttempts, p.initial)
        return base.withJitter(p.jitter).waitInBrokerFrom(p.threshold).giveUpAfter(p.maxAge)
      } catch (error) {
        // An uncapped policy whose broker waits outgrow RabbitMQ's TTL limit is refused when
        // built (broker-wait-limit.test.ts); the properties are about the ones that build.
        if (error instanceof ConfigurationError) return null
        throw error
      }
    })
    .filter((policy): policy is RetryPolicy => policy !== null)
  const attempt = fc.integer({ min: 1, max: 10_000 })
  const unit = fc.oneof(
    fc.constantFrom(0, 1 - Number.EPSILON),
    fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  )

  test('a consumer wait stays within ±jitter of its delay and is never below 1 ms', () => {
    // Every case reaches the bounds: the policy retries (attempts within its range, age 0)
    // and keeps every wait in the consumer, so no case returns early.
    // Half the cases take a jitter in whole percent, whose bounds mostly have a fraction (the
    // generated doubles are mostly extremes, whose bounds are whole).
    const retrying = fc
      .tuple(policies, fc.option(fc.integer({ min: 1, max: 99 })))
      .filter(([policy]) => policy.maxAttempts > 1)
      .map(([policy, percent]) =>
        (percent === null ? policy : policy.withJitter(percent / 100)).waitInBrokerFrom(0),
      )
      .chain((policy) =>
        fc.tuple(fc.constant(policy), fc.integer({ min: 1, max: policy.maxAttempts - 1 })),
      )
    fc.assert(
      fc.property(retrying, unit, ([policy, a], u) => {
        const wait = policy.nextWait(a, 0, () => u)
        expect(wait?.inBroker).toBe(false)
        const ms = wait?.delayMs ?? Number.NaN
        const delay = policy.delayAfter(a)
        expect(Number.isSafeInteger(ms)).toBe(true)
        expect(ms).toBeGreaterThanOrEqual(Math.max(1, delay * (1 - policy.jitter)))
        expect(ms).toBeLessThanOrEqual(Math.max(1, delay * (1 + policy.jitter)))
      }),
    )
  })

  test.each([
    // [delay, jitter, lowest, highest]: bounds with a fraction round inwards, never outside.
    [1_001, 0.5, 501, 1_501],
    [999, 0.3, 700, 1_298],
    [10, 0.25, 8, 12],
    [3, 0.5, 2, 4],
  ])(
    'a %i ms delay with jitter %d waits from %i to %i ms: a fractional bound rounds inwards',
    (delay, jitter, lowest, highest) => {
      const policy = RetryPolicy.fixed(2, delay).withJitter(jitter).waitInBrokerFrom(0)
      expect(policy.nextWait(1, 0, () => 0)).toStrictEqual({ delayMs: lowest, inBroker: false })
      expect(policy.nextWait(1, 0, () => 1 - Number.EPSILON)).toStrictEqual({
        delayMs: highest,
        inBroker: false,
      })
      expect(lowest).toBeGreaterThanOrEqual(delay * (1 - jitter))
      expect(highest).toBeLessThanOrEqual(delay * (1 + jitter))
    },
  )

  test('a broker wait is exactly the scheduled delay and at least the threshold', () => {
    fc.assert(
      fc.property(policies, attempt, unit, (policy, a, u) => {
        const wait = policy.nextWait(a, 0, () => u)
        if (wait === null || !wait.inBroker) return
        expect(wait.delayMs).toBe(policy.delayAfter(a))
        expect(wait.delayMs).toBeGreaterThanOrEqual(policy.brokerWaitThresholdMs)
        expect(policy.brokerRungs()).toContain(wait.delayMs)
      }),
    )
  })

  test('no delay exceeds the cap', () => {
    fc.assert(
      fc.property(policies, attempt, (policy, a) => {
        if (policy.maxDelayMs !== undefined) {
          expect(policy.delayAfter(a)).toBeLessThanOrEqual(policy.maxDelayMs)
        }
      }),
    )
  })

  test('the schedule never decreases and has maxAttempts − 1 entries', () => {
    fc.assert(
      fc.property(policies, (policy) => {
        const schedule = policy.schedule()
        expect(schedule).toHaveLength(policy.maxAttempts - 1)
        for (let i = 1; i < schedule.length; i++) {
          expect(schedule[i]).toBeGreaterThanOrEqual(schedule[i - 1] ?? 0)
        }
      }),
    )
  })

  test('the rungs are the distinct broker waits of the schedule, in order', () => {
    fc.assert(
      fc.property(policies, (policy) => {
        const expected = [...new Set(policy.schedule().filter((d) => policy.waitsInBroker(d)))]
        expect(policy.brokerRungs()).toStrictEqual(expected)
      }),
    )
  })

  test('a huge attempt gives the cap or MAX_SAFE_INTEGER, never Infinity or NaN', () => {
    fc.assert(
      fc.property(
        policies,
        fc.integer({ min: 10_000, max: Number.MAX_SAFE_INTEGER }),
        (policy, a) => {
          const delay = policy.delayAfter(a)
          expect(Number.isSafeInteger(delay)).toBe(true)
          if (policy.initialDelayMs === 0) expect(delay).toBe(0)
          else if (policy.multiplier === 1) expect(delay).toBe(policy.initialDelayMs)
          else expect(delay).toBe(policy.maxDelayMs ?? Number.MAX_SAFE_INTEGER)
        },
      ),
    )
    const uncapped = RetryPolicy.exponential(3, '1s').waitInBrokerFrom(0).withJitter(1)
    expect(uncapped.delayAfter(10_000)).toBe(Number.MAX_SAFE_INTEGER)
    expect(uncapped.nextWait(2, 0, () => 1 - Number.EPSILON)?.delayMs).toBeLessThanOrEqual(
      Number.MAX_SAFE_INTEGER,
    )
  })

  test('nextWait retries exactly when giveUpReason has no reason', () => {
    fc.assert(
      fc.property(policies, attempt, fc.integer({ min: 0, max: 60 * DAY }), (policy, a, age) => {
        expect(policy.nextWait(a, age) === null).toBe(policy.giveUpReason(a, age) !== undefined)
      }),
    )
  })
})
