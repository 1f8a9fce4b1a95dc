import { vi } from 'vitest'

// The fake clock the consumer's timed tests share (test/consumer/, test/engine/): timers and
// `Date` are faked, promises are not, so a test lets deliveries, handlers and copies run by
// advancing the clock and says exactly at which instant each thing happens.

/** The fake clock's start: every instant a test names is counted from it. */
export const START = Date.UTC(2030, 0, 1)

/**
 * Fakes timers and `Date` from {@link START} on (restored by {@link closeOnFakeClock}); with
 * `performance`, `performance.now()` too (it then starts at 0).
 */
export function useFakeClock(options: { readonly performance?: boolean } = {}): void {
  vi.useFakeTimers({
    now: START,
    toFake: [
      'setTimeout',
      'clearTimeout',
      'setImmediate',
      'clearImmediate',
      'Date',
      ...(options.performance === true ? (['performance'] as const) : []),
    ],
  })
}

/** Lets deliveries, handlers and copies run for `ms` of fake time. */
export async function run(ms = 0): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms)
  await vi.advanceTimersByTimeAsync(0)
}

/** Whether `promise` has settled, after letting its callbacks run. */
export async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false
  void promise.then(
    () => (done = true),
    () => (done = true),
  )
  await vi.advanceTimersByTimeAsync(0)
  return done
}

/** Closes `mq` at once (every timer it leaves run out), then gives the real clock back. */
export async function closeOnFakeClock(mq: {
  close(options: { readonly drainTimeout: number }): Promise<void>
}): Promise<void> {
  const closing = mq.close({ drainTimeout: 0 })
  await vi.runAllTimersAsync()
  await closing
  vi.useRealTimers()
}
