import { AceMqError } from '../errors.js'
import type { OutboxStore, StoredOutboxRecord } from './outbox-store.js'

/** How many times a lease is renewed within its length: a late renewal still lands in time. */
const RENEWALS_PER_LEASE = 3

/** A batch whose lease is being kept; `stop()` when it is published, marked or handed back. */
export interface KeptLease {
  readonly records: readonly StoredOutboxRecord[]
  stop(): void
}

/**
 * Keeps the leases of claimed batches alive while they are in flight (a publish held by a
 * memory alarm, a slow confirm, a batch claimed ahead and waiting its turn): every third of the
 * lease it renews the records still leased under the claim's token, so a second relay never
 * takes a record this one is still publishing. A renewal that finds records no longer held
 * (the lease had lapsed and another relay claimed them) or that fails is reported. A store
 * without `renew`, or records without a lease token, are not renewed.
 */
export class LeaseKeeper {
  readonly #store: OutboxStore
  readonly #leaseMs: number
  readonly #report: (error: unknown, context: string) => void

  constructor(
    store: OutboxStore,
    leaseMs: number,
    report: (error: unknown, context: string) => void,
  ) {
    this.#store = store
    this.#leaseMs = leaseMs
    this.#report = report
  }

  keep(records: readonly StoredOutboxRecord[]): KeptLease {
    const lease = records[0]?.lease
    if (lease === undefined || typeof this.#store.renew !== 'function') {
      return { records, stop: () => undefined }
    }
    const ids = records.map((record) => record.id)
    let stopped = false
    let renewing = false
    let held = ids.length
    const timer = setInterval(
      () => {
        if (stopped || renewing) return
        renewing = true
        this.#store
          .renew(ids, lease, this.#leaseMs)
          .then(
            (still) => {
              if (still < held && !stopped) {
                this.#report(
                  new AceMqError(
                    `the lease on ${held - still} of ${ids.length} outbox records lapsed before their publish finished: another relay may publish them too (the consumer's idempotency store catches the copy); a longer lease avoids it`,
                  ),
                  'the outbox relay lost the lease on records it was publishing',
                )
              }
              held = Math.min(held, still)
            },
            (error: unknown) => {
              this.#report(error, 'the outbox relay could not renew its lease; it tries again')
            },
          )
          .finally(() => {
            renewing = false
          })
      },
      Math.max(1, Math.floor(this.#leaseMs / RENEWALS_PER_LEASE)),
    )
    timer.unref?.()
    return {
      records,
      stop: () => {
        stopped = true
        clearInterval(timer)
      },
    }
  }
}
