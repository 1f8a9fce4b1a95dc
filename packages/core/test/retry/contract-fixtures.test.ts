import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import {
  DEAD_LETTER_EXCHANGE,
  DEFAULT_BROKER_WAIT_THRESHOLD,
  RETRY_EXCHANGE,
} from '../../src/constants.js'
import { toMillis, type Duration } from '../../src/duration.js'
import {
  deadLetterQueueName,
  parkedQueueName,
  rungArguments,
  rungQueueName,
} from '../../src/retry/queue-names.js'
import { RetryPolicy } from '../../src/retry/retry-policy.js'
import { Topology, consumerDeclarations } from '../../src/topology/topology.js'
import type { Declaration } from '../../src/transport/transport.js'
import { contractFixtures, type RetryScheduleCase } from '../fixtures.js'

const FACTORY =
  /^(?:none\(\)|fixed\((\d+), (\w+)\)|exponential\((\d+), (\w+)(?:, (\w+))?\))(?:\.giveUpAfter\((\w+)\))?$/

/** Builds the policy the fixture's `how` names, exactly as written there. */
function policyFromHow(how: string): RetryPolicy {
  const match = FACTORY.exec(how)
  if (match === null) throw new Error(`cannot read the fixture policy ${how}`)
  const [, fixedN, fixedDelay, expN, expDelay, expCap, age] = match
  const ms = (text: string): number => toMillis(text as Duration, how)
  let policy: RetryPolicy
  if (fixedN !== undefined && fixedDelay !== undefined) {
    policy = RetryPolicy.fixed(Number(fixedN), ms(fixedDelay))
  } else if (expN !== undefined && expDelay !== undefined) {
    policy = RetryPolicy.exponential(
      Number(expN),
      ms(expDelay),
      expCap === undefined ? undefined : ms(expCap),
    )
  } else {
    policy = RetryPolicy.none()
  }
  return age === undefined ? policy : policy.giveUpAfter(ms(age))
}

/**
 * The fixture's policy with every number the fixture states applied explicitly.
 *
 * The age limit is applied with `.giveUpAfter(maxMessageAgeMillis)` on purpose: the Java
 * generator has a 365-day default age limit (31 536 000 000 ms), a known bug of that library
 * ("a hidden 365-day age limit made one library dead-letter what the others retried").
 * Our default is never (`giveUpAfter` is off unless set), so the fixture's limit has to be asked for to reproduce its
 * decisions.
 */
function fixturePolicy(fixture: RetryScheduleCase): RetryPolicy {
  return policyFromHow(fixture.how)
    .withJitter(fixture.jitterFactor)
    .waitInBrokerFrom(fixture.brokerWaitThresholdMillis)
    .giveUpAfter(fixture.maxMessageAgeMillis)
}

test('the fixture holds exactly the sections and cases these tests read', () => {
  // A section or case added to the fixture fails here until a test reads it.
  expect(Object.keys(contractFixtures)).toStrictEqual([
    'generatedBy',
    'contract',
    'defaultBrokerWaitThresholdMillis',
    'deadLetterExchange',
    'retryExchange',
    'retrySchedules',
    'jitter',
    'brokerWaitThreshold',
    'naming',
    'rungArguments',
    'topology',
    'queueTypeDefaults',
  ])
  expect(contractFixtures.retrySchedules.map((s) => s.decisions.length)).toStrictEqual([
    9, 9, 9, 9, 3,
  ])
  expect(contractFixtures.brokerWaitThreshold.cases).toHaveLength(30)
  expect(contractFixtures.naming.retryQueues).toHaveLength(6)
  expect(contractFixtures.rungArguments).toHaveLength(6)
  expect(contractFixtures.topology.exchanges).toHaveLength(3)
  expect(contractFixtures.topology.queues).toHaveLength(6)
  expect(contractFixtures.topology.bindings).toHaveLength(4)
})

test('the fixture names the exchanges the constants name', () => {
  expect(contractFixtures.deadLetterExchange).toBe(DEAD_LETTER_EXCHANGE)
  expect(contractFixtures.retryExchange).toBe(RETRY_EXCHANGE)
  expect(contractFixtures.defaultBrokerWaitThresholdMillis).toBe(DEFAULT_BROKER_WAIT_THRESHOLD)
  expect(contractFixtures.brokerWaitThreshold.defaultMillis).toBe(DEFAULT_BROKER_WAIT_THRESHOLD)
})

describe.each(contractFixtures.retrySchedules)('the $name retry schedule ($how)', (fixture) => {
  const policy = fixturePolicy(fixture)

  test('our factory has the fixture’s attempts, jitter and threshold by default', () => {
    const plain = policyFromHow(fixture.how)
    expect(plain.maxAttempts).toBe(fixture.maxAttempts)
    expect(plain.jitter).toBe(fixture.jitterFactor)
    expect(plain.brokerWaitThresholdMs).toBe(fixture.brokerWaitThresholdMillis)
    expect(String(plain)).toBe(fixture.how)
  })

  test('schedules the fixture’s delays', () => {
    expect(policy.schedule()).toStrictEqual(fixture.scheduleMillis)
  })

  test('waits in the broker on the fixture’s rungs', () => {
    expect(policy.brokerRungs()).toStrictEqual(fixture.brokerRungDelaysMillis)
  })

  test.each(fixture.decisions)(
    'attempt $attempt at age $messageAgeMillis ms: retries is $retries',
    ({ attempt, messageAgeMillis, retries }) => {
      expect(policy.nextWait(attempt, messageAgeMillis) !== null).toBe(retries)
      expect(policy.giveUpReason(attempt, messageAgeMillis) === undefined).toBe(retries)
    },
  )
})

test('without an explicit age limit we keep retrying where Java’s hidden 365-day default gives up', () => {
  for (const fixture of contractFixtures.retrySchedules) {
    if (fixture.maxMessageAgeMillis !== 31_536_000_000) continue
    const ours = policyFromHow(fixture.how)
    expect(ours.maxAgeMs).toBe(0)
    if (fixture.maxAttempts > 1)
      expect(ours.nextWait(1, fixture.maxMessageAgeMillis)).not.toBeNull()
  }
})

describe('jitter', () => {
  const spec = contractFixtures.jitter
  const fixture = contractFixtures.retrySchedules.find((s) => s.name === spec.policy)
  if (fixture === undefined) throw new Error(`no retry schedule named ${spec.policy}`)
  const policy = fixturePolicy(fixture)
  const attempts = fixture.scheduleMillis.map((_, index) => index + 1)
  const unit = fc.oneof(
    fc.constantFrom(0, 0.5, 1 - Number.EPSILON),
    fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  )

  test('the fixture’s factor is the policy’s, spread both ways', () => {
    expect(policy.jitter).toBe(spec.factor)
    expect(spec.appliesInBothDirections).toBe(true)
    expect(spec.minMultiplier).toBeCloseTo(1 - spec.factor, 12)
    expect(spec.maxMultiplier).toBeCloseTo(1 + spec.factor, 12)
  })

  test.each(attempts)(
    'a consumer wait after attempt %i lands within the fixture’s bounds',
    (attempt) => {
      expect(spec.appliesToConsumerWaits).toBe(true)
      const delay = policy.delayAfter(attempt)
      fc.assert(
        fc.property(unit, (u) => {
          const wait = policy.nextWait(attempt, 0, () => u)
          expect(wait?.inBroker).toBe(false)
          const ms = wait?.delayMs ?? Number.NaN
          expect(ms).toBeGreaterThanOrEqual(delay * spec.minMultiplier)
          expect(ms).toBeLessThanOrEqual(delay * spec.maxMultiplier)
          expect(ms).toBeGreaterThanOrEqual(spec.flooredAtMillis)
        }),
      )
    },
  )

  test('the extremes of u reach the ends of the range', () => {
    const delay = policy.delayAfter(1)
    expect(policy.nextWait(1, 0, () => 0)?.delayMs).toBe(delay * spec.minMultiplier)
    expect(policy.nextWait(1, 0, () => 0.5)?.delayMs).toBe(delay)
    expect(policy.nextWait(1, 0, () => 1 - Number.EPSILON)?.delayMs).toBe(
      delay * spec.maxMultiplier,
    )
  })

  test('a broker wait is the scheduled delay exactly, because it names a rung queue', () => {
    expect(spec.appliesToBrokerWaits).toBe(false)
    // Lowered so that part of this policy's schedule is spent in the broker.
    const lowered = policy.waitInBrokerFrom(4_000)
    for (const attempt of attempts) {
      const delay = lowered.delayAfter(attempt)
      if (!lowered.waitsInBroker(delay)) continue
      fc.assert(
        fc.property(unit, (u) => {
          expect(lowered.nextWait(attempt, 0, () => u)).toStrictEqual({
            delayMs: fixture.scheduleMillis[attempt - 1],
            inBroker: true,
          })
        }),
      )
    }
    expect(lowered.brokerRungs()).toStrictEqual([4_000, 8_000])
  })
})

describe('the broker wait threshold', () => {
  test.each(contractFixtures.brokerWaitThreshold.cases)(
    'at threshold $thresholdMillis ms a $delayMillis ms wait is in the broker: $waitsInBroker',
    ({ thresholdMillis, delayMillis, waitsInBroker }) => {
      const policy = RetryPolicy.exponential(3, '1s').waitInBrokerFrom(thresholdMillis)
      expect(policy.waitsInBroker(delayMillis)).toBe(waitsInBroker)
    },
  )

  test('a threshold of zero declares no rung at all', () => {
    expect(RetryPolicy.fixed(5, '10m').waitInBrokerFrom(0).brokerRungs()).toStrictEqual([])
  })
})

describe('naming', () => {
  const naming = contractFixtures.naming

  test('the dead-letter queue', () => {
    expect(deadLetterQueueName(naming.queue)).toBe(naming.deadLetterQueue)
  })

  test('the parked queue', () => {
    expect(parkedQueueName(naming.queue)).toBe(naming.parkedQueue)
  })

  // The fixture records that Java renders 500 ms as `.retry.500ms` and Go, Python and Ruby as
  // `.retry.0s` (naming.subSecondDisagreement). We follow Java, which the fixture pins; it is
  // only reachable with a threshold lowered below a second.
  test.each(naming.retryQueues)(
    'a $delayMillis ms wait sits on $queue',
    ({ delayMillis, queue }) => {
      expect(rungQueueName(naming.queue, delayMillis)).toBe(queue)
    },
  )

  test('the sub-second disagreement is still recorded in the fixture', () => {
    expect(naming.subSecondDisagreement).toContain('orders.new.retry.500ms')
  })
})

describe('rung arguments', () => {
  test.each(contractFixtures.rungArguments)(
    '$queue is declared with exactly its TTL and dead-letter target',
    ({ queue, delayMillis, arguments: expected }) => {
      expect(rungQueueName(contractFixtures.naming.queue, delayMillis)).toBe(queue)
      expect(rungArguments(contractFixtures.naming.queue, delayMillis)).toStrictEqual(expected)
    },
  )
})

describe('topology', () => {
  const topology = contractFixtures.topology
  const policy = RetryPolicy.exponential(6, '10s', '5m')

  test('the fixture’s policy is exponential(6, 10s, 5m) at the default threshold', () => {
    expect(topology.policy).toBe(`${String(policy)} at the default threshold`)
  })

  test('its schedule and rungs are the fixture’s', () => {
    expect(policy.schedule()).toStrictEqual(topology.policyScheduleMillis)
    expect(policy.brokerRungs()).toStrictEqual(topology.policyRungDelaysMillis)
  })

  test('its rung queues are the fixture’s, with the same arguments', () => {
    const rungs = topology.queues.filter((q) => q.name.includes('.retry.'))
    expect(
      policy.brokerRungs().map((delay) => ({
        name: rungQueueName(topology.sourceQueue, delay),
        arguments: rungArguments(topology.sourceQueue, delay),
      })),
    ).toStrictEqual(rungs.map(({ name, arguments: args }) => ({ name, arguments: args })))
  })

  test('its dead-letter and parked queues are the fixture’s', () => {
    const names = topology.queues.map((q) => q.name)
    expect(names).toContain(deadLetterQueueName(topology.sourceQueue))
    expect(names).toContain(parkedQueueName(topology.sourceQueue))
  })

  // The fixture's topology: a topic exchange `orders` bound to the source queue with `order.*`.
  const declared = Topology.define()
    .exchange('orders', 'topic')
    .queueWithRetry(topology.sourceQueue, policy)
    .bind(topology.sourceQueue, 'orders', 'order.*')
    .plan()
  const byConsumer = consumerDeclarations(topology.sourceQueue, policy)

  function shape(d: Declaration): object {
    switch (d.kind) {
      case 'exchange':
        return { name: d.name, type: d.type, durable: d.durable }
      case 'queue':
        return { name: d.name, type: d.type, durable: d.durable, arguments: d.arguments }
      case 'binding':
        return { queue: d.queue, exchange: d.exchange, routingKey: d.routingKey }
    }
  }

  test.each([
    ['exchange', topology.exchanges],
    ['queue', topology.queues],
    ['binding', topology.bindings],
  ] as const)('every %s is declared as the fixture says, by whom it says', (kind, expected) => {
    const strip = ({ declaredBy: _by, ...rest }: { declaredBy: string }): object => rest
    const ofKind = (list: readonly Declaration[]): object[] =>
      list.filter((d) => d.kind === kind).map(shape)
    expect(ofKind(declared)).toEqual(expect.arrayContaining(expected.map(strip)))
    expect(ofKind(declared)).toHaveLength(expected.length)
    // `consumer` and `both` are what a consumer declares itself; `topology` only the topology.
    const fromConsumer = expected.filter((e) => e.declaredBy !== 'topology').map(strip)
    expect(ofKind(byConsumer)).toEqual(expect.arrayContaining(fromConsumer))
    expect(ofKind(byConsumer)).toHaveLength(fromConsumer.length)
    expect(expected.every((e) => ['topology', 'consumer', 'both'].includes(e.declaredBy))).toBe(
      true,
    )
  })
})

describe('queue type defaults', () => {
  const defaults = contractFixtures.queueTypeDefaults
  const policy = RetryPolicy.exponential(6, '10s', '5m')
  const typeOf = (topology: Topology, name: string): string | undefined => {
    const found = topology.plan().find((d) => d.kind === 'queue' && d.name === name)
    return found?.kind === 'queue' ? found.type : undefined
  }

  test.each([
    ['sourceQueue', Topology.define().queue('q'), 'q'],
    ['sourceQueueWithDeadLetter', Topology.define().queueWithDeadLetter('q'), 'q'],
    ['explicitClassicQueue', Topology.define().queue('q', { type: 'classic' }), 'q'],
    [
      'explicitClassicQueueWithDeadLetter',
      Topology.define().queueWithDeadLetter('q', { type: 'classic' }),
      'q',
    ],
    ['deadLetterQueue', Topology.define().queueWithDeadLetter('q'), 'q.dlq'],
    ['parkedQueue', Topology.define().queueWithDeadLetter('q'), 'q.parked'],
    ['retryRung', Topology.define().queueWithRetry('q', policy), 'q.retry.40s'],
  ] as const)('a %s is declared as the fixture says', (key, topology, name) => {
    expect(typeOf(topology, name)).toBe(defaults[key])
  })

  test('every queue a topology or a consumer declares is durable', () => {
    expect(defaults.durability.everyDeclaredQueueIsDurable).toBe(true)
    expect(defaults.durability.exclusiveAutoDeleteOrTransient).toMatch(/classic/)
    const plans = [
      Topology.define().queue('q').queue('c', { type: 'classic' }).plan(),
      Topology.define().queueWithRetry('q', policy).plan(),
      consumerDeclarations('q', policy),
    ]
    const queues = plans.flat().filter((d) => d.kind === 'queue')
    expect(queues.length).toBeGreaterThan(0)
    for (const q of queues) expect(q.durable, q.kind === 'queue' ? q.name : '').toBe(true)
  })
})
