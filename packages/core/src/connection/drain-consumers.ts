import { abortError } from '../errors.js'
import { sleep } from '../internal/timers.js'
import type { ConnectionState } from './connection-state.js'

/**
 * `AceMq.drainConsumers`: pauses consuming and waits for the running handlers to settle;
 * `true` when they all did, `false` at the timeout, an `AbortError` when `signal` aborts.
 */
export async function drainConsumers(
  state: ConnectionState,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  // Asked now, for the caller: a drain from inside a handler does not wait for that handler,
  // and only for that one (whichever task happens to finish last).
  const caller = state.currentTask.getStore()
  if (signal?.aborted) throw abortError(signal)
  const inside = caller !== undefined && caller.consumer.isRunning(caller)
  state.pauseConsuming()
  // Deliveries waiting out a retry or in-progress delay are not running handlers: they go
  // back at once rather than hold the drain open.
  for (const consumer of state.consumers) consumer.endWaits()
  // While it waits, the caller is no handler any other drain or close should wait for.
  if (inside) state.enterInside(caller)
  if (state.busy(state.inside) === 0) {
    if (inside) state.leaveInside(caller)
    return true
  }
  return new Promise<boolean>((resolve, reject) => {
    const timer = new AbortController()
    const finish = (result: boolean | Error): void => {
      timer.abort()
      state.idleWaiters.delete(check)
      state.pendingDrains.delete(finish)
      if (inside) state.leaveInside(caller)
      signal?.removeEventListener('abort', onAbort)
      if (result instanceof Error) reject(result)
      else resolve(result)
    }
    const check = (): void => {
      if (state.busy(state.inside) === 0) finish(true)
    }
    // A connection that closes first answers it: false, its handlers were given up on.
    state.pendingDrains.add(finish)
    const onAbort = (): void => finish(abortError(signal))
    // sleep() takes waits past setTimeout's 2^31−1 ms limit in steps.
    void sleep(timeoutMs, timer.signal).then((elapsed) => {
      if (elapsed) finish(false)
    })
    state.idleWaiters.add(check)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
