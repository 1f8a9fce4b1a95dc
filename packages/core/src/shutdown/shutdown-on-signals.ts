import { DEFAULT_DRAIN_TIMEOUT } from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import { ConfigurationError, describeError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'

/** What {@link shutdownOnSignals} needs of a connection: an `AceMq` has it. */
export interface Drainable {
  drainConsumers(timeout: Duration, signal?: AbortSignal): Promise<boolean>
  close(options?: { readonly drainTimeout?: Duration }): Promise<void>
}

/** Options for {@link shutdownOnSignals}. */
export interface ShutdownOptions {
  /** The signals to handle (default `SIGTERM` and `SIGINT`). */
  readonly signals?: readonly NodeJS.Signals[]
  /** How long to drain running handlers (default 20 s, inside Kubernetes' 30 s grace period). */
  readonly timeout?: Duration
  /**
   * Exit the process when done: code 0 when every handler finished, 1 when the drain ran out
   * of time or the close failed (default true). With false, only `done` reports.
   */
  readonly exit?: boolean
  /**
   * Told how it went once the connection is closed, and awaited before `done` resolves and the
   * process exits: close the rest of the service here, in order (the HTTP server, the database
   * pool, the telemetry SDK). If it throws or rejects, the error is printed as a process
   * warning (`AceMqWarning`) and changes nothing else: `done` still resolves and the exit code
   * is still decided by the drain and the close. A signal that arrives while it runs gets
   * Node's default handling (the process ends at once).
   */
  readonly onShutdown?: (result: ShutdownResult) => void | Promise<void>
}

/** How a shutdown went. */
export interface ShutdownResult {
  /** The signal that started it. */
  readonly signal: NodeJS.Signals
  /** Every running handler finished within the timeout. */
  readonly drained: boolean
  /** The connection closed without an error. */
  readonly closed: boolean
  /** How long the drain and close took. */
  readonly durationMs: number
  /** Why the close failed, if it did. */
  readonly error?: unknown
}

/** The handle {@link shutdownOnSignals} returns. */
export interface ShutdownHandle {
  /** Resolves when a signal has been handled. */
  readonly done: Promise<ShutdownResult>
  /** Removes the signal handlers (Node's default handling comes back). */
  dispose(): void
}

/**
 * For services without a framework lifecycle: on SIGTERM or SIGINT, stop taking messages,
 * drain running handlers for up to `timeout`, close the connection, and exit (0 when
 * everything finished). A second signal while draining closes at once without draining.
 * Never rejects and never leaves an unhandled rejection, even with `exit: false` and an
 * `onShutdown` that throws. Any number of handles (one per connection, say) share one process
 * listener per signal, so they never print `MaxListenersExceededWarning`.
 *
 * @example
 * ```ts
 * const mq = await connect(process.env.AMQP_URL!)
 * await mq.consume('orders.placed', options, handle)
 * shutdownOnSignals(mq, { timeout: '20s' })
 * ```
 */
export function shutdownOnSignals(mq: Drainable, options: ShutdownOptions = {}): ShutdownHandle {
  const signals = options.signals ?? (['SIGTERM', 'SIGINT'] as const)
  if (
    !Array.isArray(signals) ||
    signals.length === 0 ||
    signals.some((s) => typeof s !== 'string')
  ) {
    throw new ConfigurationError(
      `shutdownOnSignals(options.signals) must list signal names; got ${JSON.stringify(signals)}`,
    )
  }
  const timeoutMs = toMillis(
    options.timeout ?? DEFAULT_DRAIN_TIMEOUT,
    'shutdownOnSignals(options.timeout)',
  )
  const exit = options.exit ?? true

  let resolveDone!: (result: ShutdownResult) => void
  const done = new Promise<ShutdownResult>((resolve) => (resolveDone = resolve))
  let started = false
  const abortDrain = new AbortController()

  const onSignal = (signal: NodeJS.Signals): void => {
    if (started) {
      // A second signal: the operator wants out now.
      abortDrain.abort()
      return
    }
    started = true
    void shutDown(signal)
  }

  // Never rejects: with `exit: false` nothing else would catch it.
  async function shutDown(signal: NodeJS.Signals): Promise<void> {
    const startedAt = Date.now()
    // An aborted drain (a second signal) counts as not drained; so does a drain that throws,
    // even before returning a promise.
    const drained = await Promise.resolve()
      .then(() => mq.drainConsumers(timeoutMs, abortDrain.signal))
      .then(
        (finished) => finished === true,
        () => false,
      )
    let closed = true
    let error: unknown
    try {
      await mq.close({ drainTimeout: 0 })
    } catch (failure) {
      closed = false
      error = failure
    }
    const result: ShutdownResult = {
      signal,
      drained,
      closed,
      durationMs: Date.now() - startedAt,
      ...(error === undefined ? {} : { error }),
    }
    dispose()
    try {
      await options.onShutdown?.(result)
    } catch (failure) {
      process.emitWarning(`shutdownOnSignals: onShutdown threw: ${describeError(failure)}`, {
        type: 'AceMqWarning',
        code: ErrorCodes.ON_SHUTDOWN_THREW,
      })
    }
    resolveDone(result)
    // On the next tick, after the warning above (emitted on a tick of its own) is printed.
    if (exit) process.nextTick(() => process.exit(drained && closed ? 0 : 1))
  }

  // Each signal once: listed twice, one signal would count as the second that cuts the drain.
  const watched = [...new Set(signals)].map((signal) => watchSignal(signal, onSignal))

  function dispose(): void {
    for (const unwatch of watched) unwatch()
  }

  return { done, dispose }
}

type SignalHandler = (signal: NodeJS.Signals) => void

// One process listener per signal, whatever the number of handles: eleven connections each
// calling shutdownOnSignals would otherwise print MaxListenersExceededWarning.
const signalHandlers = new Map<
  NodeJS.Signals,
  { readonly listener: () => void; readonly handlers: Set<SignalHandler> }
>()

function watchSignal(signal: NodeJS.Signals, handler: SignalHandler): () => void {
  let entry = signalHandlers.get(signal)
  if (entry === undefined) {
    const handlers = new Set<SignalHandler>()
    const listener = (): void => {
      for (const each of [...handlers]) each(signal)
    }
    entry = { listener, handlers }
    signalHandlers.set(signal, entry)
    process.on(signal, listener)
  }
  const { handlers, listener } = entry
  // A wrapper of its own, so one function registered twice is removed once per dispose.
  const registered: SignalHandler = (received) => handler(received)
  handlers.add(registered)
  return () => {
    if (!handlers.delete(registered) || handlers.size > 0) return
    signalHandlers.delete(signal)
    // Node's default handling (exit on SIGTERM and SIGINT) comes back with the last listener.
    process.off(signal, listener)
  }
}
