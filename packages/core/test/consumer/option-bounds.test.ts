import { describe, expect, it } from 'vitest'
import {
  Ack,
  ConfigurationError,
  ConsumerOptions,
  InMemoryIdempotencyStore,
  type IdempotencyStore,
} from '../../src/index.js'
import { DEFAULT_HELD_TIMEOUT, DEFAULT_STORE_TIMEOUT, isAckResult } from '../../src/spi.js'

// The exact limits of ConsumerOptions and Ack, each side of every bound, and the whole message
// of each refusal (it names the argument and the value).
describe('ConsumerOptions limits', () => {
  const options = ConsumerOptions.defaults()

  it('starts with the documented held and store timeouts', () => {
    expect(options.heldTimeoutMs).toBe(DEFAULT_HELD_TIMEOUT)
    expect(options.storeTimeoutMs).toBe(DEFAULT_STORE_TIMEOUT)
    expect(DEFAULT_HELD_TIMEOUT).toBe(60_000)
    expect(DEFAULT_STORE_TIMEOUT).toBe(10_000)
  })

  it('takes a prefetch from 1 to 65,535 and a concurrency from 1 to 1,000', () => {
    expect(options.withPrefetch(1).prefetch).toBe(1)
    expect(options.withPrefetch(65_535).prefetch).toBe(65_535)
    expect(() => options.withPrefetch(65_536)).toThrow(
      new ConfigurationError(
        'withPrefetch(prefetch) must be a whole number from 1 to 65535; got 65536',
      ),
    )
    expect(() => options.withPrefetch(0)).toThrow(
      'withPrefetch(prefetch) must be a whole number from 1 to 65535; got 0',
    )
    expect(options.withConcurrency(1).concurrency).toBe(1)
    expect(options.withConcurrency(1_000).concurrency).toBe(1_000)
    expect(() => options.withConcurrency(1_001)).toThrow(
      'withConcurrency(concurrency) must be a whole number from 1 to 1000; got 1001',
    )
    expect(() => options.withConcurrency(2.5)).toThrow(
      'withConcurrency(concurrency) must be a whole number from 1 to 1000; got 2.5',
    )
  })

  it('takes a held and a store timeout from 1 ms to one day', () => {
    expect(options.withHeldTimeout(1).heldTimeoutMs).toBe(1)
    expect(options.withHeldTimeout('1d').heldTimeoutMs).toBe(86_400_000)
    expect(options.withStoreTimeout(1).storeTimeoutMs).toBe(1)
    expect(options.withStoreTimeout(86_400_000).storeTimeoutMs).toBe(86_400_000)
    expect(() => options.withHeldTimeout(0)).toThrow(
      new ConfigurationError(
        'withHeldTimeout(timeout) must be from 1 ms to 86400000 ms (1 day); got 0',
      ),
    )
    expect(() => options.withHeldTimeout(86_400_001)).toThrow(
      'withHeldTimeout(timeout) must be from 1 ms to 86400000 ms (1 day); got 86400001',
    )
    expect(() => options.withStoreTimeout('2d')).toThrow(
      'withStoreTimeout(timeout) must be from 1 ms to 86400000 ms (1 day); got "2d"',
    )
    expect(() => options.withStoreTimeout(0)).toThrow(ConfigurationError)
  })

  it('sets only the field it names, keeping the others', () => {
    const changed = options.withHeldTimeout('5s').withStoreTimeout('2s').withPrefetch(7)
    expect(changed).toMatchObject({ heldTimeoutMs: 5_000, storeTimeoutMs: 2_000, prefetch: 7 })
    expect(changed.concurrency).toBe(options.concurrency)
    expect(options.heldTimeoutMs).toBe(DEFAULT_HELD_TIMEOUT)
  })

  it('refuses a retry policy that is not one, naming what it got', () => {
    expect(() => options.withRetry(null as never)).toThrow(
      new ConfigurationError('withRetry(policy): policy must be a RetryPolicy; got null'),
    )
    expect(() => options.withRetry({ nextWait: 1 } as never)).toThrow(
      'withRetry(policy): policy must be a RetryPolicy; got [object Object]',
    )
    expect(() => options.withRetry('fixed' as never)).toThrow(
      'withRetry(policy): policy must be a RetryPolicy; got fixed',
    )
  })

  it('refuses a store missing any one of claim, confirm, release and isConfirmed', () => {
    const store = new InMemoryIdempotencyStore()
    const complete: IdempotencyStore = {
      claim: (id, owner) => store.claim(id, owner),
      confirm: (id, owner) => store.confirm(id, owner),
      release: (id, owner) => store.release(id, owner),
      isConfirmed: (id) => store.isConfirmed(id),
    }
    expect(options.idempotent(complete).store).toBe(complete)
    for (const method of ['claim', 'confirm', 'release', 'isConfirmed'] as const) {
      const missing = { ...complete, [method]: undefined }
      expect(() => options.idempotent(missing as never), method).toThrow(
        new ConfigurationError(
          'idempotent(store): store must implement claim, confirm, release and isConfirmed; got [object Object]',
        ),
      )
    }
    expect(() => options.idempotent(null as never)).toThrow(
      'idempotent(store): store must implement claim, confirm, release and isConfirmed; got null',
    )
    // A function carrying the four methods is still no store object.
    const callable = Object.assign(function store(): void {}, complete)
    expect(() => options.idempotent(callable as never)).toThrow(
      /^idempotent\(store\): store must implement claim, confirm, release and isConfirmed; got function store/,
    )
  })
})

describe('Ack limits', () => {
  it('refuses a reason of blanks, naming the method and the value', () => {
    expect(() => Ack.retry('  ')).toThrow(
      new ConfigurationError('Ack.retry(reason): reason must be a non-empty string; got "  "'),
    )
    expect(() => Ack.deadLetter('')).toThrow(
      'Ack.deadLetter(reason): reason must be a non-empty string; got ""',
    )
    expect(() => Ack.park(7 as never)).toThrow(
      'Ack.park(reason): reason must be a non-empty string; got 7',
    )
  })

  it('makes frozen results', () => {
    for (const result of [
      Ack.accept(),
      Ack.release(),
      Ack.retry('x', 5),
      Ack.deadLetter('x'),
      Ack.park('x'),
    ]) {
      expect(Object.isFrozen(result)).toBe(true)
    }
  })

  it('does not count a value carrying the brand with a kind it does not know', () => {
    const brand = Symbol.for('acemq.ack')
    expect(isAckResult({ [brand]: brand, kind: 'accept' })).toBe(true)
    expect(isAckResult({ [brand]: brand, kind: 'skip' })).toBe(false)
    expect(isAckResult({ [brand]: true, kind: 'accept' })).toBe(false)
    expect(isAckResult(null)).toBe(false)
  })
})
