import type {
  Instrumentation,
  ProcessInfo,
  ProcessScope,
  PublishInfo,
  PublishScope,
  ConsumeOutcome,
  PublishOutcome,
} from './instrumentation.js'

type Report = (error: unknown, context: string) => void

/**
 * Wraps an instrumentation so that nothing it throws reaches the engine: a telemetry failure
 * may lose a span or a count, never a message, an ack or a caller's result. Each failure is
 * reported once per call to `report`.
 */
export function safeInstrumentation(inner: Instrumentation, report: Report): Instrumentation {
  return {
    publishStarted(info: PublishInfo): PublishScope | undefined {
      let scope: PublishScope | undefined
      try {
        scope = inner.publishStarted(info)
      } catch (error) {
        report(error, 'instrumentation.publishStarted failed')
        return undefined
      }
      return scope && new SafePublishScope(scope, report)
    },
    processStarted(info: ProcessInfo): ProcessScope | undefined {
      let scope: ProcessScope | undefined
      try {
        scope = inner.processStarted(info)
      } catch (error) {
        report(error, 'instrumentation.processStarted failed')
        return undefined
      }
      return scope && new SafeProcessScope(scope, report)
    },
    ...guarded(inner, 'rungMissing', report),
    ...guarded(inner, 'outboxRelayed', report),
    ...guarded(inner, 'pipelineRunFinished', report),
    ...guarded(inner, 'interceptorFailed', report),
    ...guarded(inner, 'requestSettled', report),
    ...guarded(inner, 'scheduleEvent', report),
  }
}

/** The notifications an instrumentation may leave out: one argument, nothing returned. */
type Notification =
  | 'rungMissing'
  | 'outboxRelayed'
  | 'pipelineRunFinished'
  | 'interceptorFailed'
  | 'requestSettled'
  | 'scheduleEvent'

/**
 * `{ [name]: inner[name] }` with every throw reported instead of thrown; `{}` when `inner` has no
 * such member (the engine then skips the call).
 */
function guarded<K extends Notification>(
  inner: Instrumentation,
  name: K,
  report: Report,
): Pick<Instrumentation, K> | Record<string, never> {
  const notify = inner[name] as ((...args: unknown[]) => void) | undefined
  if (notify === undefined) return {}
  const safe = (...args: unknown[]): void => {
    try {
      notify.apply(inner, args)
    } catch (error) {
      report(error, `instrumentation.${name} failed`)
    }
  }
  return { [name]: safe } as Pick<Instrumentation, K>
}

class SafePublishScope implements PublishScope {
  readonly #scope: PublishScope
  readonly #report: Report
  constructor(scope: PublishScope, report: Report) {
    this.#scope = scope
    this.#report = report
  }
  end(outcome: PublishOutcome, error?: unknown): void {
    try {
      this.#scope.end(outcome, error)
    } catch (failure) {
      this.#report(failure, 'instrumentation: ending a publish scope failed')
    }
  }
}

class SafeProcessScope implements ProcessScope {
  readonly #scope: ProcessScope
  readonly #report: Report
  constructor(scope: ProcessScope, report: Report) {
    this.#scope = scope
    this.#report = report
  }
  run<T>(fn: () => T): T {
    // The handler runs exactly once: if the scope fails before calling it, it runs without
    // the scope's context; if it throws itself, that is the handler's own error.
    let called = false
    try {
      return this.#scope.run(() => {
        called = true
        return fn()
      })
    } catch (error) {
      if (called) throw error
      this.#report(error, 'instrumentation: entering a process scope failed')
      return fn()
    }
  }
  handled(durationMs: number, error?: unknown): void {
    this.#guard(() => this.#scope.handled(durationMs, error), 'handled')
  }
  retried(delayMs: number, inBroker: boolean): void {
    this.#guard(() => this.#scope.retried(delayMs, inBroker), 'retried')
  }
  setAside(
    outcome: 'dead_lettered' | 'parked' | 'rejected' | 'invalid',
    queue: string,
    reason: string,
  ): void {
    this.#guard(() => this.#scope.setAside(outcome, queue, reason), 'setAside')
  }
  end(outcome: ConsumeOutcome, error?: unknown): void {
    this.#guard(() => this.#scope.end(outcome, error), 'end')
  }
  #guard(call: () => void, what: string): void {
    try {
      call()
    } catch (error) {
      this.#report(error, `instrumentation: ${what} failed`)
    }
  }
}
