/**
 * The exit codes of `acemq`, for scripts.
 *
 * @example
 * ```ts
 * if (result.status === EXIT_CODES.down) page()
 * ```
 */
export const EXIT_CODES = Object.freeze({
  /** The command did what it was asked. */
  ok: 0,
  /** It could not: the broker was out of reach, a publish failed, `health` found DOWN. */
  failed: 1,
  /** The command line was wrong: an unknown command or option, a bad value. */
  usage: 2,
})

/** An error that ends the run with the usage exit code. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}
