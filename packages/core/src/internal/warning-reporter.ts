import { DEFAULT_ERROR_REPORT_INTERVAL } from '../constants.js'
import { describeError } from '../errors.js'
import { ErrorCodes, errorCodeOf } from '../error-codes.js'

/** Kinds of failure printed in one interval at most; the rest are counted and summed up. */
const MAX_KINDS_PER_INTERVAL = 10
/** Kinds remembered at once: the oldest is forgotten first. */
const MAX_REMEMBERED_KINDS = 100

/** Options of {@link warningReporter}. */
export interface WarningReporterOptions {
  /** How often one kind of failure is printed, in milliseconds (default 60 s). */
  readonly intervalMs?: number
  /** The clock (default `Date.now`). */
  readonly now?: () => number
  /** Where a warning goes (default `process.emitWarning`, as an `AceMqWarning`). */
  readonly emit?: (message: string, code: string) => void
}

/**
 * `AceMqOptions.onError` when none is given: each distinct failure is printed as a process
 * warning (`AceMqWarning`) the first time, then at most once per interval with the number of
 * repeats held back meanwhile, so a store that fails for every message prints one line a
 * minute, not one per message. Failures are told apart by their code and message, not by the
 * context (which names the message). At most ten kinds are printed per interval; the rest are
 * counted and summed up at the start of the next one.
 */
export function warningReporter(
  options: WarningReporterOptions = {},
): (error: unknown, context: string) => void {
  const intervalMs = options.intervalMs ?? DEFAULT_ERROR_REPORT_INTERVAL
  const now = options.now ?? Date.now
  const emit = options.emit ?? emitAceMqWarning
  const kinds = new Map<string, { printedAt: number; heldBack: number }>()
  let windowStart = -Infinity
  let printedInWindow = 0
  let overflow = 0

  return (error, context) => {
    const at = now()
    if (at - windowStart >= intervalMs) {
      if (overflow > 0) {
        emit(
          `${overflow} more failure(s) of other kinds in the last ${seconds(intervalMs)} were not printed (at most ${MAX_KINDS_PER_INTERVAL} kinds are printed per interval)`,
          ErrorCodes.WARNINGS_HELD_BACK,
        )
      }
      windowStart = at
      printedInWindow = 0
      overflow = 0
    }
    const code = errorCodeOf(error)
    const description = describeError(error)
    const key = `${code ?? ''}\u0000${description}`
    const kind = kinds.get(key)
    if (kind !== undefined && at - kind.printedAt < intervalMs) {
      kind.heldBack++
      return
    }
    if (printedInWindow >= MAX_KINDS_PER_INTERVAL) {
      overflow++
      return
    }
    printedInWindow++
    const repeats =
      kind !== undefined && kind.heldBack > 0
        ? ` (${kind.heldBack} more like it since the last warning)`
        : ''
    emit(`${context}: ${description}${repeats}`, code ?? ErrorCodes.FAILURE)
    kinds.delete(key)
    kinds.set(key, { printedAt: at, heldBack: 0 })
    if (kinds.size > MAX_REMEMBERED_KINDS) {
      const oldest = kinds.keys().next()
      if (oldest.done !== true) kinds.delete(oldest.value)
    }
  }
}

function emitAceMqWarning(message: string, code: string): void {
  process.emitWarning(message, { type: 'AceMqWarning', code })
}

function seconds(ms: number): string {
  return ms % 1_000 === 0 ? `${ms / 1_000} s` : `${ms} ms`
}
