import type { InMemoryOutboxStore, OutboxStore } from '../../../src/index.js'

/** The in-memory store with some of its methods replaced (a failing or gated mark, a claim). */
export function storeWith(inner: InMemoryOutboxStore, replaced: Partial<OutboxStore>): OutboxStore {
  return {
    claimBatch: (batch, lease) => inner.claimBatch(batch, lease),
    renew: (ids, lease, leaseMs) => inner.renew(ids, lease, leaseMs),
    markPublished: (ids) => inner.markPublished(ids),
    markFailed: (id, reason, options) => inner.markFailed(id, reason, options),
    release: (ids, lease) => inner.release(ids, lease),
    pendingCount: () => inner.pendingCount(),
    retired: (limit) => inner.retired(limit),
    reoffer: (ids) => inner.reoffer(ids),
    stats: () => inner.stats(),
    ...replaced,
  }
}
