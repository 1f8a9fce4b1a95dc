import { describe, expect, it } from 'vitest'
import { InMemoryIdempotencyStore } from '../../src/index.js'

// Purging a few expired entries per call, and what is forgotten first when memory is full
// (found by mutation testing, docs/mutation.md).

const CLAIM_TIMEOUT = 60_000
const RETENTION = 3_600_000

function store(options: { maxEntries?: number } = {}): {
  store: InMemoryIdempotencyStore
  advance(ms: number): void
} {
  let clock = Date.UTC(2030, 0, 1)
  return {
    store: new InMemoryIdempotencyStore({
      claimTimeout: CLAIM_TIMEOUT,
      retention: RETENTION,
      now: () => clock,
      ...options,
    }),
    advance: (ms) => {
      clock += ms
    },
  }
}

describe('options', () => {
  it('refuses options that are not an object, showing them', () => {
    expect(() => new InMemoryIdempotencyStore(null as never)).toThrow(
      'InMemoryIdempotencyStore options must be an object; got null',
    )
    expect(() => new InMemoryIdempotencyStore('1d' as never)).toThrow(
      'InMemoryIdempotencyStore options must be an object; got 1d',
    )
  })

  it('remembers a single id with maxEntries 1', async () => {
    const { store: s } = store({ maxEntries: 1 })
    expect(s.maxEntries).toBe(1)
    expect(await s.tryClaim('a')).toBe('claimed')
    await s.confirm('a')
    expect(await s.tryClaim('a')).toBe('duplicate')
  })
})

describe('purging', () => {
  it('forgets at most 32 expired entries per call, claims and confirmed ids sharing the budget', async () => {
    const { store: s, advance } = store()
    for (let i = 0; i < 10; i++) await s.tryClaim(`stale-${i}`)
    for (let i = 0; i < 40; i++) await s.confirm(`done-${i}`)
    advance(RETENTION + 1)
    expect(s.size).toBe(50)
    await s.tryClaim('new-1')
    // 10 stale claims and 22 expired confirmed ids went; the new claim came.
    expect(s.size).toBe(50 - 32 + 1)
    await s.tryClaim('new-2')
    expect(s.size).toBe(2)
  })

  it('forgets at most 32 stale claims per call', async () => {
    const { store: s, advance } = store()
    for (let i = 0; i < 40; i++) await s.tryClaim(`stale-${i}`)
    advance(CLAIM_TIMEOUT + 1)
    await s.tryClaim('new')
    expect(s.size).toBe(40 - 32 + 1)
  })

  it('stops at the first entry that is still live, and never forgets it', async () => {
    const { store: s, advance } = store()
    await s.tryClaim('old')
    advance(CLAIM_TIMEOUT + 1)
    await s.tryClaim('live')
    await s.tryClaim('another')
    // 'old' was stale and went; 'live' is live and stays, and stops the purge.
    expect(s.size).toBe(2)
    expect(await s.share().tryClaim('live')).toBe('in_progress')
  })

  it('takes over a stale claim and claims an expired id the purge has not reached yet', async () => {
    const { store: s, advance } = store()
    for (let i = 0; i < 40; i++) await s.tryClaim(`c-${i}`)
    advance(CLAIM_TIMEOUT + 1)
    // The purge of this call forgets 32; c-39 is still there, stale, and is taken over.
    expect(await s.share().tryClaim('c-39')).toBe('claimed')

    const { store: t, advance: later } = store()
    for (let i = 0; i < 40; i++) await t.confirm(`d-${i}`)
    later(RETENTION + 1)
    expect(await t.share().tryClaim('d-39')).toBe('claimed')
  })
})

describe('a full store forgets', () => {
  it('a stale claim first, but not one exactly as old as the claim timeout: that one is live', async () => {
    const { store: s, advance } = store({ maxEntries: 2 })
    await s.tryClaim('claim')
    await s.confirm('done')
    advance(CLAIM_TIMEOUT)
    await s.tryClaim('third')
    // The claim is exactly claimTimeout old, so live: the oldest confirmed id went instead.
    expect(await s.share().tryClaim('claim')).toBe('in_progress')
    expect(await s.isConfirmed('done')).toBe(false)
  })

  it('a stale claim before the oldest confirmed id, when a confirm makes room', async () => {
    const { store: s, advance } = store({ maxEntries: 2 })
    await s.tryClaim('stale')
    await s.confirm('done')
    advance(CLAIM_TIMEOUT + 1)
    // confirm() makes room without purging first: the stale claim is what goes.
    await s.confirm('more')
    expect(await s.isConfirmed('done')).toBe(true)
    expect(await s.isConfirmed('more')).toBe(true)
    expect(s.size).toBe(2)
  })

  it('a claim older than the claim timeout before any confirmed id', async () => {
    const { store: s, advance } = store({ maxEntries: 2 })
    await s.tryClaim('claim')
    await s.confirm('done')
    advance(CLAIM_TIMEOUT + 1)
    await s.share().tryClaim('third')
    expect(await s.isConfirmed('done')).toBe(true)
    expect(s.size).toBe(2)
  })
})
