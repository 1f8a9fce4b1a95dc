import { DEFAULT_DRAIN_TIMEOUT } from '../constants.js'
import { toMillis, type Duration } from '../duration.js'
import { ConfigurationError } from '../errors.js'

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
  /** Told how it went, before the process exits. */
  readonly onShutdown?: (result: ShutdownResult) => void
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

  async function shutDown(signal: NodeJS.Signals): Promise<void> {
    const startedAt = Date.now()
    // An aborted drain (a second signal) counts as not drained.
    const drained = await mq.drainConsumers(timeoutMs, abortDrain.signal).catch(() => false)
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
      options.onShutdown?.(result)
    } finally {
      resolveDone(result)
      if (exit) process.exit(drained && closed ? 0 : 1)
    }
  }

  const listeners = signals.map((signal) => {
    const listener = (): void => onSignal(signal)
    process.on(signal, listener)
    return [signal, listener] as const
  })

  function dispose(): void {
    for (const [signal, listener] of listeners) process.off(signal, listener)
  }

  return { done, dispose }
}
