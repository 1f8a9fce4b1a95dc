import { describe, expect, it } from 'vitest'
import {
  Ack,
  ConfigurationError,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  RetryPolicy,
} from '../../src/index.js'
import { DEFAULT_IN_PROGRESS_DELAY, isAckResult } from '../../src/spi.js'

describe('ConsumerOptions', () => {
  it('starts from the documented defaults', () => {
    const options = ConsumerOptions.defaults()
    expect(options).toMatchObject({
      prefetch: 20,
      concurrency: 1,
      retryDelayMs: 5_000,
      inProgressDelayMs: DEFAULT_IN_PROGRESS_DELAY,
    })
    expect(options.retryPolicy).toBeUndefined()
    expect(options.store).toBeUndefined()
  })

  it('returns a new frozen value from every withX()', () => {
    const base = ConsumerOptions.defaults()
    const store = InMemoryIdempotencyStore.forOneDay()
    const policy = RetryPolicy.fixed(3, '1s')
    const changed = base
      .withPrefetch(50)
      .withConcurrency(4)
      .withRetry(policy)
      .idempotent(store)
      .withRetryDelay('2s')
      .withInProgressDelay(250)
    expect(changed).not.toBe(base)
    expect(base.prefetch).toBe(20)
    expect(changed).toMatchObject({
      prefetch: 50,
      concurrency: 4,
      retryPolicy: policy,
      store,
      retryDelayMs: 2_000,
      inProgressDelayMs: 250,
    })
    expect(Object.isFrozen(changed)).toBe(true)
  })

  it('refuses bad values with errors that name the argument and the value', () => {
    const options = ConsumerOptions.defaults()
    expect(() => options.withPrefetch(0)).toThrow(/withPrefetch\(prefetch\).*got 0/)
    expect(() => options.withPrefetch(1.5)).toThrow(ConfigurationError)
    expect(() => options.withConcurrency(-1)).toThrow(/withConcurrency\(concurrency\).*got -1/)
    expect(() => options.withRetryDelay('soon' as never)).toThrow(/withRetryDelay\(delay\)/)
    expect(() => options.withInProgressDelay(-5)).toThrow(/withInProgressDelay\(delay\)/)
    expect(() => options.idempotent({} as never)).toThrow(/idempotent\(store\)/)
    expect(() => options.withRetry(undefined as never)).toThrow(/withRetry\(policy\)/)
  })
})

describe('Ack', () => {
  it('builds each result', () => {
    expect(Ack.accept()).toEqual({ kind: 'accept' })
    expect(Ack.retry('busy')).toEqual({ kind: 'retry', reason: 'busy', delayMs: undefined })
    expect(Ack.retry('busy', '2s')).toEqual({ kind: 'retry', reason: 'busy', delayMs: 2_000 })
    expect(Ack.deadLetter('bad')).toEqual({ kind: 'dead-letter', reason: 'bad' })
    expect(Ack.park('look')).toEqual({ kind: 'park', reason: 'look' })
    expect(Ack.release()).toEqual({ kind: 'release' })
  })

  it('needs a reason', () => {
    expect(() => Ack.park('')).toThrow(/Ack.park\(reason\)/)
    expect(() => Ack.deadLetter(undefined as never)).toThrow(ConfigurationError)
    expect(() => Ack.retry('x', -1)).toThrow(/Ack.retry\(delay\)/)
  })

  it('recognises its own results and nothing else', () => {
    expect(isAckResult(Ack.release())).toBe(true)
    expect(isAckResult({ kind: 'other' })).toBe(false)
    expect(isAckResult('accept')).toBe(false)
    expect(isAckResult(undefined)).toBe(false)
  })
})
