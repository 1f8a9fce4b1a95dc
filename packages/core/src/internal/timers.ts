import { abortError } from '../errors.js'

/**
 * Waits `ms`, or less when `signal` aborts. Resolves true when the full time passed, false
 * when it was cut short; never rejects. The timer is unref()'d so a wait never keeps the
 * process alive on its own.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const until = Date.now() + ms
    let timer: ReturnType<typeof setTimeout>
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    // setTimeout fires at once for anything over 2^31-1 ms, so a long wait is taken in steps.
    const arm = (): void => {
      const left = until - Date.now()
      if (left <= 0) {
        signal?.removeEventListener('abort', onAbort)
        resolve(true)
        return
      }
      timer = setTimeout(arm, Math.min(left, MAX_TIMEOUT_MS))
      timer.unref?.()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    arm()
  })
}

const MAX_TIMEOUT_MS = 2_147_483_647

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
