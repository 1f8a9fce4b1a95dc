import { abortError } from '@acemq/core/spi'

interface Waiter {
  readonly resolve: () => void
  readonly reject: (error: unknown) => void
  readonly cleanup: () => void
}

/**
 * A counting semaphore for confirm slots. A released permit goes straight to the oldest waiter
 * (no barging), a waiter can give up through its `AbortSignal`, and `rejectWaiters` ends every
 * wait at once (close).
 */
export class Permits {
  readonly #size: number
  #available: number
  readonly #waiters: Waiter[] = []

  constructor(size: number) {
    this.#size = size
    this.#available = size
  }

  /** Permits in use. */
  get inUse(): number {
    return this.#size - this.#available
  }

  tryAcquire(): boolean {
    if (this.#available === 0) return false
    this.#available -= 1
    return true
  }

  acquire(signal: AbortSignal | undefined): Promise<void> {
    if (this.tryAcquire()) return Promise.resolve()
    if (signal?.aborted) return Promise.reject(abortError(signal))
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.#waiters.indexOf(waiter)
        if (index >= 0) this.#waiters.splice(index, 1)
        reject(abortError(signal))
      }
      const waiter: Waiter = {
        resolve,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#waiters.push(waiter)
    })
  }

  release(): void {
    const next = this.#waiters.shift()
    if (next !== undefined) {
      next.cleanup()
      next.resolve()
      return
    }
    if (this.#available < this.#size) this.#available += 1
  }

  rejectWaiters(error: unknown): void {
    for (const waiter of this.#waiters.splice(0)) {
      waiter.cleanup()
      waiter.reject(error)
    }
  }
}
