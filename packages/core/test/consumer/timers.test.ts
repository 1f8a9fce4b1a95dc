import { getEventListeners } from 'node:events'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  MAX_TIMER_DELAY_MS,
  onAbort,
  rejectOnAbort,
  setLongTimeout,
  settlesWithin,
  sleep,
} from '../../src/internal/timers.js'
import { settled } from './fake-clock.js'

// The engine's consumer waits, drain and close deadlines are built on these helpers (tested here
// because test/internal/ has no folder of its own yet).

const DAY = 86_400_000

describe('long timers', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })

  afterEach(() => {
    vi.useRealTimers()
  })

  it('setTimeout itself fires a delay over 2^31 − 1 ms after 1 ms (what the helpers work around)', () => {
    const fired = vi.fn()
    setTimeout(fired, 30 * DAY)
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledOnce()
  })

  it('a 30-day sleep is still waiting at 1 ms, 1 day and 29.9 days, and ends at 30 days', async () => {
    const wait = sleep(30 * DAY)
    await vi.advanceTimersByTimeAsync(1)
    expect(await settled(wait)).toBe(false)
    await vi.advanceTimersByTimeAsync(DAY - 1)
    expect(await settled(wait)).toBe(false)
    await vi.advanceTimersByTimeAsync(28.9 * DAY)
    expect(await settled(wait)).toBe(false)
    await vi.advanceTimersByTimeAsync(0.1 * DAY - 1)
    expect(await settled(wait)).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    await expect(wait).resolves.toBe(true)
  })

  it('a 30-day sleep ends early, with false, when its signal aborts', async () => {
    const controller = new AbortController()
    const wait = sleep(30 * DAY, controller.signal)
    await vi.advanceTimersByTimeAsync(25 * DAY)
    controller.abort()
    await expect(wait).resolves.toBe(false)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('setLongTimeout fires once, exactly when its delay has passed', () => {
    const fired = vi.fn()
    setLongTimeout(fired, 3 * MAX_TIMER_DELAY_MS + 5)
    vi.advanceTimersByTime(3 * MAX_TIMER_DELAY_MS + 4)
    expect(fired).not.toHaveBeenCalled()
    vi.advanceTimersByTime(1)
    expect(fired).toHaveBeenCalledOnce()
    vi.advanceTimersByTime(10 * MAX_TIMER_DELAY_MS)
    expect(fired).toHaveBeenCalledOnce()
    expect(vi.getTimerCount()).toBe(0)
  })

  it('setLongTimeout fires a delay of 2^31 − 1 ms or less in one timer, and 0 at once', () => {
    const long = vi.fn()
    const none = vi.fn()
    setLongTimeout(long, MAX_TIMER_DELAY_MS)
    setLongTimeout(none, 0)
    vi.advanceTimersByTime(0)
    expect(none).toHaveBeenCalledOnce()
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS - 1)
    expect(long).not.toHaveBeenCalled()
    vi.advanceTimersByTime(1)
    expect(long).toHaveBeenCalledOnce()
  })

  it('setLongTimeout can be cleared in any of its steps', () => {
    const fired = vi.fn()
    const timer = setLongTimeout(fired, 30 * DAY)
    vi.advanceTimersByTime(27 * DAY)
    timer.clear()
    vi.advanceTimersByTime(10 * DAY)
    expect(fired).not.toHaveBeenCalled()
    expect(vi.getTimerCount()).toBe(0)
  })

  it('settlesWithin a 30-day deadline answers true when the work ends on day 2', async () => {
    let finish!: () => void
    const work = new Promise<void>((resolve) => (finish = resolve))
    const answer = settlesWithin(work, 30 * DAY)
    await vi.advanceTimersByTimeAsync(DAY)
    expect(await settled(answer)).toBe(false)
    finish()
    await expect(answer).resolves.toBe(true)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('settlesWithin a 30-day deadline answers false at 30 days, not at 1 ms', async () => {
    const answer = settlesWithin(new Promise<void>(() => undefined), 30 * DAY)
    await vi.advanceTimersByTimeAsync(1)
    expect(await settled(answer)).toBe(false)
    await vi.advanceTimersByTimeAsync(30 * DAY - 2)
    expect(await settled(answer)).toBe(false)
    await vi.advanceTimersByTimeAsync(1)
    await expect(answer).resolves.toBe(false)
  })

  it('settlesWithin 0 answers whether the work has already settled', async () => {
    await expect(settlesWithin(Promise.resolve(), 0)).resolves.toBe(true)
    await expect(settlesWithin(new Promise<void>(() => undefined), 0)).resolves.toBe(false)
  })
})

describe('long timers on the real clock', () => {
  it('setLongTimeout never keeps the process alive on its own', () => {
    const timeouts = (): number =>
      process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length
    const before = timeouts()
    const timer = setLongTimeout(() => undefined, 30 * DAY)
    try {
      expect(timeouts()).toBe(before)
    } finally {
      timer.clear()
    }
  })
})

describe('waits on one signal', () => {
  function collectWarnings(): { readonly warnings: Error[]; stop(): void } {
    const warnings: Error[] = []
    const listener = (warning: Error): void => {
      warnings.push(warning)
    }
    process.on('warning', listener)
    return { warnings, stop: () => process.off('warning', listener) }
  }

  it('fifty sleeps on one signal add one abort listener and print no MaxListenersExceededWarning', async () => {
    const { warnings, stop } = collectWarnings()
    try {
      const controller = new AbortController()
      const waits = Array.from({ length: 50 }, () => sleep(60_000, controller.signal))
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1)
      controller.abort()
      expect(await Promise.all(waits)).toStrictEqual(Array.from({ length: 50 }, () => false))
      // Node prints the warning on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.map((warning) => warning.name)).not.toContain('MaxListenersExceededWarning')
    } finally {
      stop()
    }
  })

  it('a sleep that ends leaves no listener on the signal', async () => {
    const controller = new AbortController()
    await Promise.all([sleep(1, controller.signal), sleep(2, controller.signal)])
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0)
  })

  it('fifty rejectOnAbort waits on one signal add one listener, and all reject on abort', async () => {
    const { warnings, stop } = collectWarnings()
    try {
      const controller = new AbortController()
      const waits = Array.from({ length: 50 }, () => rejectOnAbort(controller.signal))
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1)
      controller.abort(new Error('stop'))
      for (const wait of waits) await expect(wait.promise).rejects.toThrow()
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.map((warning) => warning.name)).not.toContain('MaxListenersExceededWarning')
    } finally {
      stop()
    }
  })

  it('onAbort calls each watcher once, not one that stopped watching, and at once on an aborted signal', () => {
    const controller = new AbortController()
    const first = vi.fn()
    const second = vi.fn()
    onAbort(controller.signal, first)
    const stopSecond = onAbort(controller.signal, second)
    stopSecond()
    controller.abort()
    controller.abort()
    expect(first).toHaveBeenCalledOnce()
    expect(second).not.toHaveBeenCalled()
    const late = vi.fn()
    onAbort(controller.signal, late)
    expect(late).toHaveBeenCalledOnce()
  })
})
