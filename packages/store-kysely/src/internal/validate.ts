import { ConfigurationError } from '@acemq/core'

export {
  assertIdempotencyKey as assertId,
  assertOwnerToken,
  parseTableName,
  positiveMillis,
} from '@acemq/core/spi'

/** An integer option with a lower bound. */
export function integerAtLeast(value: number, min: number, name: string): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new ConfigurationError(
      `${name} must be an integer of at least ${min}; got ${String(value)}`,
    )
  }
  return value
}

/** A function option. */
export function fn<T>(value: T, name: string): T {
  if (typeof value !== 'function') {
    throw new ConfigurationError(`${name} must be a function; got ${String(value)}`)
  }
  return value
}
