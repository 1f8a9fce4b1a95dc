import { describe, expect, it } from 'vitest'
import { idempotencyStoreConformance } from '@acemq/testing'
import { DEFAULT_CLAIM_TIMEOUT } from '../../src/constants.js'
import { ConfigurationError } from '../../src/errors.js'
import {
  DEFAULT_IDEMPOTENCY_MAX_ENTRIES,
  DEFAULT_IDEMPOTENCY_RETENTION,
  InMemoryIdempotencyStore,
} from '../../src/idempotency/in-memory-idempotency-store.js'

idempotencyStoreConformance('InMemoryIdempotencyStore', {
  async create({ claimTimeoutMs, retentionMs, now }) {
    const store = new InMemoryIdempotencyStore({
      claimTimeout: claimTimeoutMs,
      retention: retentionMs,
      now,
    })
    return { store, second: async () => store.share(), cleanup: async () => {} }
  },
})

describe('InMemoryIdempotencyStore', () => {
  it('remembers ids for one day with a 5 minute claim window from forOneDay()', () => {
    const store = InMemoryIdempotencyStore.forOneDay()
    expect(store.retention).toBe(86_400_000)
    expect(store.claimTimeout).toBe(300_000)
    expect(store.maxEntries).toBe(DEFAULT_IDEMPOTENCY_MAX_ENTRIES)
    expect(InMemoryIdempotencyStore.DEFAULT_CLAIM_TIMEOUT).toBe(DEFAULT_CLAIM_TIMEOUT)
    expect(DEFAULT_IDEMPOTENCY_RETENTION).toBe(86_400_000)
  })

  it('accepts durations with units', () => {
    const store = new InMemoryIdempotencyStore({ retention: '6h', claimTimeout: '90s' })
    expect(store.retention).toBe(21_600_000)
    expect(store.claimTimeout).toBe(90_000)
  })

  it.each([
    [{ retention: -1 }, 'retention'],
    [{ retention: 0 }, 'retention'],
    [{ retention: '1 day' }, 'retention'],
    [{ claimTimeout: Number.NaN }, 'claimTimeout'],
    [{ claimTimeout: '0s' }, 'claimTimeout'],
    [{ maxEntries: 0 }, 'maxEntries'],
    [{ maxEntries: 1.5 }, 'maxEntries'],
    [{ now: 5 }, 'now'],
  ])('refuses the options %j with an error naming %s', (options, name) => {
    const create = (): unknown => new InMemoryIdempotencyStore(options as never)
    expect(create).toThrow(ConfigurationError)
    expect(create).toThrow(new RegExp(`^${name} must .*got`))
  })

  it('shares the remembered ids between handles made by share()', async () => {
    const a = InMemoryIdempotencyStore.forOneDay()
    const b = a.share()
    expect(await a.tryClaim('m-1')).toBe('claimed')
    expect(await b.tryClaim('m-1')).toBe('in_progress')
    expect(b.size).toBe(1)
  })

  it('forgets the oldest confirmed id first when it is full, never a live claim', async () => {
    let clock = 0
    const store = new InMemoryIdempotencyStore({ maxEntries: 3, now: () => clock })
    await store.tryClaim('live')
    clock += 1
    await store.tryClaim('done-1')
    await store.confirm('done-1')
    clock += 1
    await store.tryClaim('done-2')
    await store.confirm('done-2')
    clock += 1
    await store.tryClaim('new')
    expect(store.size).toBe(3)
    expect(await store.isConfirmed('done-1')).toBe(false)
    expect(await store.isConfirmed('done-2')).toBe(true)
    expect(await store.share().tryClaim('live')).toBe('in_progress')
  })

  it('forgets a stale claim before any confirmed id when it is full', async () => {
    let clock = 0
    const store = new InMemoryIdempotencyStore({
      maxEntries: 2,
      claimTimeout: 10,
      now: () => clock,
    })
    await store.tryClaim('done')
    await store.confirm('done')
    await store.tryClaim('crashed')
    clock += 11
    await store.tryClaim('new')
    expect(await store.isConfirmed('done')).toBe(true)
    expect(store.size).toBe(2)
  })

  it('forgets the oldest live claim only when every entry is a live claim', async () => {
    const store = new InMemoryIdempotencyStore({ maxEntries: 2, now: () => 0 })
    await store.tryClaim('a')
    await store.tryClaim('b')
    await store.tryClaim('c')
    expect(store.size).toBe(2)
    expect(await store.share().tryClaim('a')).toBe('claimed')
  })

  it('purges expired entries a few at a time, not with a full scan per call', async () => {
    let clock = 0
    const store = new InMemoryIdempotencyStore({
      retention: 100,
      claimTimeout: 50,
      now: () => clock,
    })
    for (let i = 0; i < 200; i++) {
      await store.tryClaim(`old-${i}`)
      await store.confirm(`old-${i}`)
    }
    clock += 101
    await store.tryClaim('fresh-1')
    const afterOne = store.size
    expect(afterOne).toBeGreaterThan(150)
    for (let i = 2; i <= 20; i++) await store.tryClaim(`fresh-${i}`)
    expect(store.size).toBe(20)
  })

  it('keeps purging when the clock has not moved past the newest entries', async () => {
    let clock = 0
    const store = new InMemoryIdempotencyStore({ retention: 100, now: () => clock })
    await store.tryClaim('old')
    await store.confirm('old')
    clock = 50
    await store.tryClaim('young')
    await store.confirm('young')
    clock = 120
    await store.tryClaim('trigger')
    expect(await store.isConfirmed('old')).toBe(false)
    expect(await store.isConfirmed('young')).toBe(true)
    expect(store.size).toBe(2)
  })
})
