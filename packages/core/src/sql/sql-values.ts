import { AceMqError } from '../errors.js'
import { ErrorCodes } from '../error-codes.js'

/**
 * A number read back from a column, whatever the driver made of it (a number, a bigint, a
 * numeric string, never an empty one): a whole number when `whole`, else any finite one. Anything else throws
 * `ACEMQ_STORE_RESULT_UNKNOWN`, saying that `table` returned it for `column`. For store authors.
 *
 * @example
 * ```ts
 * const createdAt = columnNumber(row.created_at, 'the outbox table', 'created_at', true)
 * ```
 */
export function columnNumber(value: unknown, table: string, column: string, whole = false): number {
  const n =
    typeof value === 'number'
      ? value
      : typeof value === 'bigint' || (typeof value === 'string' && value.trim() !== '')
        ? Number(value)
        : NaN
  if (whole ? !Number.isSafeInteger(n) : !Number.isFinite(n)) {
    throw new AceMqError(
      `${table} returned ${String(value)} for ${column}, not a ${whole ? 'whole number' : 'number'}`,
      { code: ErrorCodes.STORE_RESULT_UNKNOWN },
    )
  }
  return n
}
