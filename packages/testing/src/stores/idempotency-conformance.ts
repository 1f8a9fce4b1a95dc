import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { IdempotencyStore } from '@acemq/core'
import { claimWith, type ClaimingIdempotencyStore } from '@acemq/core/spi'

/** What a conformance run is given to build the store under test. */
export interface ConformanceStoreOptions {
  /** The claim window the store must use, in milliseconds. */
  readonly claimTimeoutMs: number
  /** The retention the store must use, in milliseconds. */
  readonly retentionMs: number
  /** The clock the store must read (epoch ms); the suite moves it instead of sleeping. */
  readonly now: () => number
}

/** A store under test, with a way to get more owners on the same backing data. */
export interface ConformanceFixture {
  readonly store: ClaimingIdempotencyStore & Partial<{ close(): Promise<void> | void }>
  /** Another instance (another owner) on the same backing data, as a second process would be. */
  second(): Promise<ClaimingIdempotencyStore>
  /** Closes every instance `second` made and removes the backing data. */
  cleanup(): Promise<void>
}

/** Builds one fresh fixture per test. */
export interface ConformanceFactory {
  create(options: ConformanceStoreOptions): Promise<ConformanceFixture>
}

const START = Date.UTC(2030, 0, 1)
const CLAIM_TIMEOUT = 60_000
const RETENTION = 3_600_000

/**
 * Registers the cases every idempotency store must pass: claims, duplicates, in-progress,
 * leases, releases that only free the claim their owner still holds, retention (and its
 * boundary), races, and key and owner validation.
 *
 * @example
 * ```ts
 * idempotencyStoreConformance('in-memory', { async create(o) { ... } })
 * ```
 */
export function idempotencyStoreConformance(name: string, factory: ConformanceFactory): void {
  describe(`${name}: the idempotency store contract`, () => {
    let clock = START
    let fixture: ConformanceFixture
    let store: ConformanceFixture['store']
    let seq = 0
    const advance = (ms: number): void => {
      clock += ms
    }
    const id = (label: string): string => `${label}-${++seq}`

    beforeEach(async () => {
      clock = START
      fixture = await factory.create({
        claimTimeoutMs: CLAIM_TIMEOUT,
        retentionMs: RETENTION,
        now: () => clock,
      })
      store = fixture.store
    })

    afterEach(async () => {
      await store.close?.()
      await fixture.cleanup()
    })

    it('claims a new id', async () => {
      const key = id('new')
      expect(await store.tryClaim(key)).toBe('claimed')
    })

    it('answers claim() with true only for the caller that takes the claim', async () => {
      const key = id('bool')
      const other = await fixture.second()
      expect(await store.claim(key)).toBe(true)
      expect(await other.claim(key)).toBe(false)
      expect(await store.claim(key)).toBe(false)
    })

    it('tells a second instance that a live claim is in progress', async () => {
      const key = id('live')
      const other = await fixture.second()
      await store.tryClaim(key)
      expect(await other.tryClaim(key)).toBe('in_progress')
      expect(await store.tryClaim(key)).toBe('in_progress')
      expect(await other.isConfirmed(key)).toBe(false)
    })

    it('answers duplicate to every instance once the id is confirmed', async () => {
      const key = id('done')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.confirm(key)
      expect(await store.tryClaim(key)).toBe('duplicate')
      expect(await other.tryClaim(key)).toBe('duplicate')
      expect(await store.isConfirmed(key)).toBe(true)
      expect(await other.isConfirmed(key)).toBe(true)
    })

    it('makes the id claimable again when its owner releases it', async () => {
      const key = id('released')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.release(key)
      expect(await other.tryClaim(key)).toBe('claimed')
    })

    it('ignores a release by an instance that does not own the claim', async () => {
      const key = id('not-mine')
      const other = await fixture.second()
      await store.tryClaim(key)
      await other.release(key)
      expect(await other.tryClaim(key)).toBe('in_progress')
    })

    it('keeps a confirmed id a duplicate when its owner releases it afterwards', async () => {
      const key = id('confirmed-then-released')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.confirm(key)
      await store.release(key)
      expect(await other.tryClaim(key)).toBe('duplicate')
    })

    it('keeps a claim exactly as old as the claim timeout live', async () => {
      const key = id('boundary')
      const other = await fixture.second()
      await store.tryClaim(key)
      advance(CLAIM_TIMEOUT)
      expect(await other.tryClaim(key)).toBe('in_progress')
    })

    it('lets another instance take over a claim older than the claim timeout', async () => {
      const key = id('stale')
      const other = await fixture.second()
      await store.tryClaim(key)
      advance(CLAIM_TIMEOUT + 1)
      expect(await other.tryClaim(key)).toBe('claimed')
      expect(await store.tryClaim(key)).toBe('in_progress')
    })

    it("does not let a stale owner's late release free the new owner's claim", async () => {
      const key = id('late-release')
      const taker = await fixture.second()
      const third = await fixture.second()
      await store.tryClaim(key)
      advance(CLAIM_TIMEOUT + 1)
      expect(await taker.tryClaim(key)).toBe('claimed')
      await store.release(key)
      expect(await third.tryClaim(key)).toBe('in_progress')
      await taker.confirm(key)
      expect(await third.tryClaim(key)).toBe('duplicate')
    })

    it('records a confirm that comes after the lease was lost, so the work is not done again', async () => {
      const key = id('late-confirm')
      const taker = await fixture.second()
      const third = await fixture.second()
      await store.tryClaim(key)
      advance(CLAIM_TIMEOUT + 1)
      await taker.tryClaim(key)
      await store.confirm(key)
      expect(await third.tryClaim(key)).toBe('duplicate')
      await taker.release(key)
      expect(await third.tryClaim(key)).toBe('duplicate')
      expect(await third.isConfirmed(key)).toBe(true)
    })

    it("does not let a stale owner's late release free a newer owner's claim on the same instance", async () => {
      const key = id('same-instance-late-release')
      const third = await fixture.second()
      expect(await store.tryClaim(key, 'owner-a')).toBe('claimed')
      advance(CLAIM_TIMEOUT + 1)
      expect(await store.tryClaim(key, 'owner-b')).toBe('claimed')
      await store.release(key, 'owner-a')
      expect(await third.tryClaim(key)).toBe('in_progress')
      await store.release(key, 'owner-b')
      expect(await third.tryClaim(key)).toBe('claimed')
    })

    it('frees a claim only when the owner that holds it releases it, through any instance', async () => {
      const key = id('owner-release')
      const other = await fixture.second()
      expect(await store.tryClaim(key, 'owner-a')).toBe('claimed')
      await store.release(key, 'owner-b')
      await store.release(key)
      await other.release(key)
      expect(await other.tryClaim(key, 'owner-c')).toBe('in_progress')
      // The token, not the instance, owns the claim.
      await other.release(key, 'owner-a')
      expect(await other.tryClaim(key, 'owner-c')).toBe('claimed')
    })

    it('does not let an owner-less release free a claim taken with an owner', async () => {
      const key = id('ownerless-release')
      const other = await fixture.second()
      await store.tryClaim(key, 'owner-a')
      await store.release(key)
      expect(await other.tryClaim(key)).toBe('in_progress')
    })

    it("gives owner-less callers the instance's own token: its release frees its claim, another instance's does not", async () => {
      const key = id('ownerless')
      const other = await fixture.second()
      expect(await store.tryClaim(key)).toBe('claimed')
      await store.release(key, 'owner-a')
      await other.release(key)
      expect(await other.tryClaim(key)).toBe('in_progress')
      await store.release(key)
      expect(await other.tryClaim(key)).toBe('claimed')
    })

    it('answers in_progress to an owner asking again for the live claim it holds, and claimed once it is stale', async () => {
      const key = id('same-owner')
      expect(await store.tryClaim(key, 'owner-a')).toBe('claimed')
      expect(await store.tryClaim(key, 'owner-a')).toBe('in_progress')
      expect(await store.claim(key, 'owner-a')).toBe(false)
      advance(CLAIM_TIMEOUT + 1)
      expect(await store.tryClaim(key, 'owner-a')).toBe('claimed')
      // Still a's claim: a's release frees it.
      await store.release(key, 'owner-a')
      expect(await store.tryClaim(key, 'owner-b')).toBe('claimed')
    })

    it('records a confirm by an owner whose claim was taken over on the same instance', async () => {
      const key = id('same-instance-late-confirm')
      const third = await fixture.second()
      await store.tryClaim(key, 'owner-a')
      advance(CLAIM_TIMEOUT + 1)
      expect(await store.tryClaim(key, 'owner-b')).toBe('claimed')
      await store.confirm(key, 'owner-a')
      expect(await third.tryClaim(key)).toBe('duplicate')
      await store.release(key, 'owner-b')
      expect(await third.tryClaim(key)).toBe('duplicate')
    })

    it('passes owners through claimWith, on a full store and on one with the four basic methods', async () => {
      const key = id('basic-owner')
      const other = await fixture.second()
      const basic: IdempotencyStore = {
        claim: (k, o) => other.claim(k, o),
        confirm: (k, o) => other.confirm(k, o),
        release: (k, o) => other.release(k, o),
        isConfirmed: (k) => other.isConfirmed(k),
      }
      expect(await claimWith(store, key, 'owner-a')).toBe('claimed')
      expect(await claimWith(basic, key, 'owner-b')).toBe('in_progress')
      await basic.release(key, 'owner-a')
      expect(await claimWith(basic, key, 'owner-b')).toBe('claimed')
    })

    it('keeps a confirmed id a duplicate when it is exactly as old as the retention, and forgets it 1 ms later', async () => {
      const key = id('retention-boundary')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.confirm(key)
      advance(RETENTION)
      expect(await other.isConfirmed(key)).toBe(true)
      expect(await other.tryClaim(key)).toBe('duplicate')
      advance(1)
      expect(await other.isConfirmed(key)).toBe(false)
      expect(await other.tryClaim(key)).toBe('claimed')
    })

    it('never retakes a confirmed id, however long after the claim timeout', async () => {
      const key = id('never-retaken')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.confirm(key)
      advance(RETENTION - 1)
      expect(await other.tryClaim(key)).toBe('duplicate')
      expect(await other.isConfirmed(key)).toBe(true)
    })

    it('forgets a confirmed id once the retention has passed', async () => {
      const key = id('expired')
      const other = await fixture.second()
      await store.tryClaim(key)
      await store.confirm(key)
      advance(RETENTION + 1)
      expect(await store.isConfirmed(key)).toBe(false)
      expect(await other.tryClaim(key)).toBe('claimed')
      expect(await store.tryClaim(key)).toBe('in_progress')
    })

    it('gives a stale claim to exactly one of eight instances racing for it', async () => {
      const key = id('race-stale')
      await store.tryClaim(key)
      advance(CLAIM_TIMEOUT + 1)
      const racers = await Promise.all(Array.from({ length: 8 }, () => fixture.second()))
      const results = await Promise.all(racers.map((racer) => racer.tryClaim(key)))
      expect(results.filter((r) => r === 'claimed')).toHaveLength(1)
      expect(results.filter((r) => r === 'in_progress')).toHaveLength(7)
    })

    it('gives a new id to exactly one of two instances racing for it', async () => {
      const other = await fixture.second()
      for (let i = 0; i < 20; i++) {
        const key = id('race-new')
        const results = await Promise.all([store.tryClaim(key), other.tryClaim(key)])
        expect(results.sort()).toEqual(['claimed', 'in_progress'])
      }
    })

    it('gives the same answers through the four basic methods (claimWith)', async () => {
      const key = id('basic')
      const other = await fixture.second()
      const basic: IdempotencyStore = {
        claim: (k) => other.claim(k),
        confirm: (k) => other.confirm(k),
        release: (k) => other.release(k),
        isConfirmed: (k) => other.isConfirmed(k),
      }
      expect(await claimWith(store, key)).toBe('claimed')
      expect(await claimWith(basic, key)).toBe('in_progress')
      await store.confirm(key)
      expect(await claimWith(basic, key)).toBe('duplicate')
      expect(await claimWith(basic, id('basic-new'))).toBe('claimed')
    })

    it('treats a unicode id as one key, and different code points as different keys', async () => {
      const other = await fixture.second()
      const key = `zamówienie-łódź-注文-🚀-${++seq}`
      expect(await store.tryClaim(key)).toBe('claimed')
      expect(await other.tryClaim(key)).toBe('in_progress')
      await store.confirm(key)
      expect(await other.tryClaim(key)).toBe('duplicate')
      expect(await other.isConfirmed(key)).toBe(true)
      // NFC and NFD spell the same word with different code points: the store keeps ids
      // exactly as given and never normalises them.
      const nfc = `caf\u00e9-${++seq}`
      const nfd = nfc.normalize('NFD')
      expect(await store.tryClaim(nfc)).toBe('claimed')
      expect(await other.tryClaim(nfd)).toBe('claimed')
    })

    it('keeps ids that differ only in trailing spaces or in case apart', async () => {
      // A database that pads or folds keys (MySQL's VARCHAR collations ignore trailing
      // spaces) would answer 'duplicate' for a message that was never handled.
      const base = `Order-${++seq}`
      const variants = [base, `${base} `, `${base}  `, base.toLowerCase(), base.toUpperCase()]
      for (const key of variants) expect(await store.tryClaim(key)).toBe('claimed')
      for (const key of variants) await store.confirm(key)
      const other = await fixture.second()
      for (const key of variants) expect(await other.tryClaim(key)).toBe('duplicate')
      expect(await other.tryClaim(`${base}   `)).toBe('claimed')
    })

    it('refuses ids that are not non-empty UTF-8 strings, naming the value', async () => {
      const bad: unknown[] = ['', 42, undefined, null, Buffer.from('m-1'), 'a\u0000b', '\ud800x']
      const methods = ['tryClaim', 'claim', 'confirm', 'release', 'isConfirmed'] as const
      for (const value of bad) {
        for (const method of methods) {
          const call = (store[method] as (id: unknown) => Promise<unknown>).bind(store)
          await expect(call(value), `${method}(${String(value)})`).rejects.toMatchObject({
            code: 'ACEMQ_CONFIGURATION',
            message: expect.stringContaining('id must be'),
          })
        }
      }
    })

    it('refuses owners that are not 1 to 64 visible ASCII characters, naming the value', async () => {
      const bad: unknown[] = [
        '',
        'x'.repeat(65),
        'has space',
        'trailing ',
        'zażółć',
        'a\u0000',
        42,
        null,
      ]
      const methods = ['tryClaim', 'claim', 'confirm', 'release'] as const
      for (const value of bad) {
        for (const method of methods) {
          const call = (store[method] as (id: string, owner: unknown) => Promise<unknown>).bind(
            store,
          )
          await expect(
            call(id('bad-owner'), value),
            `${method}(${String(value)})`,
          ).rejects.toMatchObject({
            code: 'ACEMQ_CONFIGURATION',
            message: expect.stringContaining('owner must be'),
          })
        }
      }
      const longest = 'x'.repeat(64)
      const key = id('longest-owner')
      expect(await store.tryClaim(key, longest)).toBe('claimed')
      await store.release(key, longest)
      expect(await store.tryClaim(key, crypto.randomUUID())).toBe('claimed')
    })
  })
}
