/**
 * What a store answers when asked for a claim:
 * - `claimed`: the caller holds the claim now, so it runs the handler;
 * - `duplicate`: the id was confirmed earlier, so the message is acked without running;
 * - `in_progress`: someone holds a live, unconfirmed claim, so the message is put back.
 */
export type ClaimResult = 'claimed' | 'duplicate' | 'in_progress'

/**
 * Remembers which message ids were handled. A claim is a lease: an unconfirmed claim older
 * than the store's claim timeout may be taken over; a confirmed id is never retaken while
 * it is retained. Ids are UTF-8 text.
 *
 * Every claim has an owner: the `owner` token passed with it (the engine passes a fresh one for
 * each delivery it claims), or the store instance's own token when none is passed. A release
 * frees the claim only while that owner still holds it, so a stale owner releasing late never
 * frees a claim someone else has taken over — not even another task in the same process on the
 * same store instance.
 *
 * @example
 * ```ts
 * if (await store.claim(id)) { try { await work(); await store.confirm(id) } catch { await store.release(id) } }
 * ```
 */
export interface IdempotencyStore {
  /**
   * Takes the claim on `id` for `owner`: true if it holds it now (new, or a stale claim taken
   * over).
   */
  claim(id: string, owner?: string): Promise<boolean>
  /** Marks `id` handled: from now on it is a duplicate. */
  confirm(id: string, owner?: string): Promise<void>
  /**
   * Gives up `owner`'s claim on `id`, so a retry can take it. Never frees a claim that another
   * owner holds (one that took it over after this owner's lease ran out).
   */
  release(id: string, owner?: string): Promise<void>
  /** Whether `id` was confirmed (and is still retained). */
  isConfirmed(id: string): Promise<boolean>
}

/**
 * A store that answers claimed / duplicate / in progress in one call. Both shipped SQL stores
 * and the in-memory store implement it; a store with only the four basic methods gets the
 * same answer from `claim` followed by `isConfirmed`.
 *
 * @example
 * ```ts
 * switch (await store.tryClaim(id)) { case 'claimed': ...; case 'duplicate': ...; case 'in_progress': ... }
 * ```
 */
export interface ClaimingIdempotencyStore extends IdempotencyStore {
  tryClaim(id: string, owner?: string): Promise<ClaimResult>
}

/**
 * Whether a store answers {@link ClaimingIdempotencyStore.tryClaim}.
 *
 * @example
 * ```ts
 * isClaimingStore(store) ? await store.tryClaim(id) : ...
 * ```
 */
export function isClaimingStore(store: IdempotencyStore): store is ClaimingIdempotencyStore {
  return typeof (store as Partial<ClaimingIdempotencyStore>).tryClaim === 'function'
}

/**
 * Asks any store for a claim: `tryClaim` when it has one, else `claim` then `isConfirmed`.
 *
 * @example
 * ```ts
 * const result = await claimWith(store, message.envelope.id)
 * ```
 */
export function claimWith(
  store: IdempotencyStore,
  id: string,
  owner?: string,
): Promise<ClaimResult> {
  // Not async: the store's own promise is handed on, without another one around it.
  if (isClaimingStore(store)) return store.tryClaim(id, owner)
  return claimThenAsk(store, id, owner)
}

async function claimThenAsk(
  store: IdempotencyStore,
  id: string,
  owner: string | undefined,
): Promise<ClaimResult> {
  if (await store.claim(id, owner)) return 'claimed'
  return (await store.isConfirmed(id)) ? 'duplicate' : 'in_progress'
}
