import { errorCodeOf } from '../error-codes.js'
import { describeError } from '../errors.js'
import type { HealthContributor, HealthReport } from '../health/health.js'

/**
 * The health contributor of a store that can check itself: `UP` with `table` while `verify`
 * resolves, `DEGRADED` with `table`, `error` and its `code` while it rejects — never `DOWN`, since
 * restarting the process would not create a table or bring a database back. For store authors:
 * what a store's `healthContributor()` returns.
 *
 * @example
 * ```ts
 * healthContributor() { return storeHealthContributor('idempotency-store', this.table, () => this.verify()) }
 * ```
 */
export function storeHealthContributor(
  name: string,
  table: string,
  verify: () => Promise<void>,
): HealthContributor {
  return {
    name,
    async report(): Promise<HealthReport> {
      try {
        await verify()
        return { name, status: 'UP', details: { table } }
      } catch (error) {
        const details: Record<string, string> = { table, error: describeError(error) }
        const code = errorCodeOf(error)
        if (code !== undefined) details['code'] = code
        return { name, status: 'DEGRADED', details }
      }
    },
  }
}
