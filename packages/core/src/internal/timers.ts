import { abortError } from '../errors.js'

/**
 * The longest delay `setTimeout` honours: 2^31 − 1 ms (about 24.8 days). Node fires anything
 * longer after 1 ms, so {@link setLongTimeout} takes a longer delay in steps of this size.
 */
export const MAX_TIMER_DELAY_MS = 2_147_483_647

/** A timer started by {@link setLongTimeout}. */
export interface LongTimeout {
  /** Stops the timer; `fn` is not called. Safe to call more than once, or after it fired. */
  clear(): void
}

/**
 * Calls `fn` once `ms` milliseconds have passed, however long that is: a delay over
 * {@link MAX_TIMER_DELAY_MS} is taken in steps of at most that size (a plain `setTimeout` would
 * fire it after 1 ms). Each step is counted off the delay, so the wall clock jumping does not
 * shorten the wait. The timer is unref()'d: it never keeps the process alive on its own. A
 * negative or NaN delay fires as 0 does; `Infinity` never fires.
 *
 * @example
 * ```ts
 * const deadline = setLongTimeout(() => finish(false), toMillis('30d'))
 * // later, when the work ended first:
 * deadline.clear()
 * ```
 */
export function setLongTimeout(fn: () => void, ms: number): LongTimeout {
  let left = ms > 0 ? ms : 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const step = (): void => {
    const delay = Math.min(left, MAX_TIMER_DELAY_MS)
    left -= delay
    timer = setTimeout(left > 0 ? step : fire, delay)
    timer.unref?.()
  }
  const fire = (): void => {
    timer = undefined
    fn()
  }
  step()
  return {
    clear() {
      clearTimeout(timer)
      timer = undefined
    },
  }
}

interface AbortWatchers {
  readonly callbacks: Set<() => void>
  readonly listener: () => void
}

const abortWatchers = new WeakMap<AbortSignal, AbortWatchers>()

/**
 * Calls `fn` once when `signal` aborts (at once when it already has); returns a function that
 * stops watching. However many wait on one signal, the signal carries one `abort` listener, so
 * many concurrent waits (every handler of a consumer sleeping on its closing signal) never
 * print `MaxListenersExceededWarning`, and the listener goes when the last watcher does.
 *
 * @example
 * ```ts
 * const stop = onAbort(signal, () => finish(abortError(signal)))
 * // when done without an abort:
 * stop()
 * ```
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  if (signal.aborted) {
    fn()
    return () => undefined
  }
  let watchers = abortWatchers.get(signal)
  if (watchers === undefined) {
    const callbacks = new Set<() => void>()
    const listener = (): void => {
      abortWatchers.delete(signal)
      for (const callback of [...callbacks]) {
        try {
          callback()
        } catch (error) {
          // As an event listener's error would be: reported, without stopping the others.
          queueMicrotask(() => {
            throw error
          })
        }
      }
      callbacks.clear()
    }
    watchers = { callbacks, listener }
    abortWatchers.set(signal, watchers)
    signal.addEventListener('abort', listener, { once: true })
  }
  const { callbacks, listener } = watchers
  // A wrapper of its own, so one function watching twice is called twice and stopped once.
  const callback = (): void => fn()
  callbacks.add(callback)
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0) return
    if (abortWatchers.get(signal) === watchers) abortWatchers.delete(signal)
    signal.removeEventListener('abort', listener)
  }
}

/**
 * Waits `ms` (any length: see {@link setLongTimeout}), or less when `signal` aborts. Resolves
 * true when the full time passed, false when it was cut short; never rejects. The timer is
 * unref()'d so a wait never keeps the process alive on its own.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    let stopWatching = (): void => undefined
    const timer = setLongTimeout(() => {
      stopWatching()
      resolve(true)
    }, ms)
    if (signal !== undefined) {
      stopWatching = onAbort(signal, () => {
        timer.clear()
        resolve(false)
      })
    }
  })
}

/**
 * Resolves true when `promise` settles within `ms` (any length: see {@link setLongTimeout}),
 * false otherwise; with `ms` 0 or less, whether it has already settled. The deadline is
 * unref()'d and cleared as soon as the answer is known. A `promise` that rejects counts as
 * settled. This is the wait for drain and close deadlines: `drainConsumers('30d')` must not
 * give up after 1 ms.
 *
 * @example
 * ```ts
 * if (!(await settlesWithin(idle(), drainTimeoutMs))) abortRunningHandlers()
 * ```
 */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const settle = (): void => {
      timer?.clear()
      resolve(true)
    }
    let timer: LongTimeout | undefined
    promise.then(settle, settle)
    if (ms > 0) {
      timer = setLongTimeout(() => resolve(false), ms)
    } else {
      // Callbacks of an already settled promise run before this one, queued after them.
      void Promise.resolve()
        .then(() => undefined)
        .then(() => resolve(false))
    }
  })
}

/** Rejects with an AbortError as soon as `signal` aborts; resolves never otherwise. */
export function rejectOnAbort(signal: AbortSignal): {
  readonly promise: Promise<never>
  dispose(): void
} {
  let dispose = (): void => undefined
  const promise = new Promise<never>((_, reject) => {
    dispose = onAbort(signal, () => reject(abortError(signal)))
  })
  promise.catch(() => undefined)
  return { promise, dispose: () => dispose() }
}

/** A promise with its resolver, for Node 20 (which has no `Promise.withResolvers`). */
export interface Deferred<T> {
  readonly promise: Promise<T>
  resolve(value: T): void
  reject(error: unknown): void
}

/** Creates a {@link Deferred}. */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}
