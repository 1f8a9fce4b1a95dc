import { abortError } from '../errors.js'

/**
 * Waits `ms`, or less when `signal` aborts. Resolves true when the full time passed, false
 * when it was cut short; never rejects. The timer is unref()'d so a wait never keeps the
 * process alive on its own.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    timer.unref?.()
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** Rejects with an AbortError as soon as `signal` aborts; resolves never otherwise. */
export function rejectOnAbort(signal: AbortSignal): {
  readonly promise: Promise<never>
  dispose(): void
} {
  let dispose = (): void => undefined
  const promise = new Promise<never>((_, reject) => {
    if (signal.aborted) {
      reject(abortError(signal))
      return
    }
    const onAbort = (): void => reject(abortError(signal))
    signal.addEventListener('abort', onAbort, { once: true })
    dispose = () => signal.removeEventListener('abort', onAbort)
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
