/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Waits until `condition` holds, polling every 10 ms, or throws after `timeoutMs` naming
 * `what`. Needs no test runner.
 *
 * @example
 * ```ts
 * await eventually(() => handled.length === 3, 5_000, 'three messages handled')
 * ```
 */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await condition()) return
    await sleep(10)
  }
  throw new Error(`${what} did not hold within ${timeoutMs} ms`)
}
