import { randomBytes, randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { ClaimCheckStore } from '@acemq/core'

/** A store under test. */
export interface ClaimCheckConformanceFixture {
  readonly store: ClaimCheckStore
  /** Another instance on the same backing data, as another process would have. */
  second(): Promise<ClaimCheckStore>
  /** Closes every instance and removes the backing data. */
  cleanup(): Promise<void>
}

/** Builds one fresh fixture per test. */
export interface ClaimCheckConformanceFactory {
  create(): Promise<ClaimCheckConformanceFixture>
}

const HOUR = 3_600_000

/**
 * Registers the cases every claim-check store must pass (docs/design.md §26): bodies kept byte
 * for byte (empty, binary, 5 MB), seen by a second instance, replaced by a second put, absent
 * keys answered `undefined`, deletes that forgive an absent key, purges that remove only what
 * has expired, and keys that could escape the store refused.
 *
 * @example
 * ```ts
 * claimCheckStoreConformance('files', { async create() { ... } })
 * ```
 */
export function claimCheckStoreConformance(
  name: string,
  factory: ClaimCheckConformanceFactory,
): void {
  describe(`${name}: the claim-check store contract`, () => {
    let fixture: ClaimCheckConformanceFixture
    let store: ClaimCheckStore
    const later = (): number => Date.now() + HOUR

    beforeEach(async () => {
      fixture = await factory.create()
      store = fixture.store
    })
    afterEach(async () => {
      await fixture.cleanup()
    })

    it('keeps a body byte for byte, and a second instance reads it', async () => {
      const key = randomUUID()
      const body = Uint8Array.from([0, 1, 0xac, 0x01, 0xff, 0, 0x7f])
      await store.put(key, body, later())
      expect(Buffer.from((await store.get(key)) as Uint8Array).equals(Buffer.from(body))).toBe(true)
      const second = await fixture.second()
      expect(Buffer.from((await second.get(key)) as Uint8Array).equals(Buffer.from(body))).toBe(
        true,
      )
    })

    it('keeps an empty body as empty, not as absent', async () => {
      const key = randomUUID()
      await store.put(key, new Uint8Array(), later())
      expect((await store.get(key))?.length).toBe(0)
    })

    it('keeps a 5 MB body', async () => {
      const key = randomUUID()
      const body = randomBytes(5 * 1024 * 1024)
      await store.put(key, body, later())
      expect(Buffer.from((await store.get(key)) as Uint8Array).equals(body)).toBe(true)
    })

    it('answers undefined for a key it does not hold', async () => {
      expect(await store.get(randomUUID())).toBeUndefined()
    })

    it('replaces a body put again under the same key', async () => {
      const key = randomUUID()
      await store.put(key, Buffer.from('first'), later())
      await store.put(key, Buffer.from('second'), later())
      expect(Buffer.from((await store.get(key)) as Uint8Array).toString()).toBe('second')
    })

    it('deletes a body, and deleting an absent key is not an error', async () => {
      const key = randomUUID()
      await store.put(key, Buffer.from('x'), later())
      await store.delete(key)
      expect(await store.get(key)).toBeUndefined()
      await store.delete(key)
    })

    it('purges only the bodies whose expiry has passed, and says how many', async () => {
      const now = Date.now()
      const [gone, kept] = [randomUUID(), randomUUID()]
      await store.put(gone, Buffer.from('old'), now - 1_000)
      await store.put(kept, Buffer.from('new'), now + HOUR)
      expect(await store.purgeExpired(now)).toBe(1)
      expect(await store.get(gone)).toBeUndefined()
      expect(Buffer.from((await store.get(kept)) as Uint8Array).toString()).toBe('new')
      expect(await store.purgeExpired(now)).toBe(0)
      expect(await store.purgeExpired(now + 2 * HOUR)).toBe(1)
    })

    it('refuses keys that could name something outside the store, naming the argument', async () => {
      for (const key of ['', '../x', 'a/b', '.hidden', 'x'.repeat(201)]) {
        await expect(store.put(key, Buffer.from('x'), later())).rejects.toThrow(/put\(key\)/)
        await expect(store.get(key)).rejects.toThrow(/get\(key\)/)
      }
    })
  })
}
