import { describe, expect, it } from 'vitest'
import {
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
  PurgeCadence,
  reportPurgeFailure,
} from '../../src/idempotency/purge-cadence.js'

describe('PurgeCadence', () => {
  it('is due on every purgeEvery-th claim', () => {
    const cadence = new PurgeCadence({ purgeEvery: 3 })
    const due = Array.from({ length: 7 }, () => cadence.claimed())
    expect(due).toEqual([false, false, true, false, false, true, false])
  })

  it('is never due with purgeEvery 0, for a scheduled purge', () => {
    const cadence = new PurgeCadence({ purgeEvery: 0 })
    expect(Array.from({ length: 250 }, () => cadence.claimed())).not.toContain(true)
  })

  it('defaults to a purge of at most 1000 rows every 100 claims', () => {
    const cadence = new PurgeCadence()
    expect(cadence.every).toBe(DEFAULT_PURGE_EVERY)
    expect(cadence.batchSize).toBe(DEFAULT_PURGE_BATCH_SIZE)
    expect([DEFAULT_PURGE_EVERY, DEFAULT_PURGE_BATCH_SIZE]).toEqual([100, 1_000])
  })

  it('refuses a purgeEvery or purgeBatchSize that is not an integer in range, naming it and the value', () => {
    expect(() => new PurgeCadence({ purgeEvery: -1 })).toThrow(
      'purgeEvery must be an integer of at least 0; got -1',
    )
    expect(() => new PurgeCadence({ purgeEvery: 1.5 })).toThrow(
      'purgeEvery must be an integer of at least 0; got 1.5',
    )
    expect(() => new PurgeCadence({ purgeBatchSize: 0 })).toThrow(
      'purgeBatchSize must be an integer of at least 1; got 0',
    )
  })
})

describe('reportPurgeFailure', () => {
  it('hands the error to onError, and swallows an onError that throws', () => {
    const seen: unknown[] = []
    const error = new Error('no deletes today')
    reportPurgeFailure((e) => seen.push(e), error)
    expect(seen).toEqual([error])
    expect(() =>
      reportPurgeFailure(() => {
        throw new Error('reporter down')
      }, error),
    ).not.toThrow()
  })
})
