import { ConfigurationError } from '../errors.js'

/** How many partitions an ordered queue has unless `partitions(n)` says otherwise (4). */
export const DEFAULT_PARTITIONS = 4

/** The most partitions an ordered queue may have (1024): each one is a quorum queue and a consumer. */
export const MAX_PARTITIONS = 1_024

const FNV_OFFSET_BASIS = 0x811c9dc5
const FNV_PRIME = 0x01000193
const encoder = new TextEncoder()

/**
 * The 32-bit FNV-1a hash of `key`'s UTF-8 bytes, with the sign bit cleared (`& 0x7fffffff`):
 * the number every AceMQ library derives a key's partition from.
 *
 * @example
 * ```ts
 * partitionHash('acct-7') // 172104758
 * ```
 */
export function partitionHash(key: string): number {
  let hash = FNV_OFFSET_BASIS
  for (const byte of encoder.encode(key)) {
    hash ^= byte
    // Math.imul keeps the product to 32 bits, as the C definition's unsigned overflow does.
    hash = Math.imul(hash, FNV_PRIME)
  }
  return hash & 0x7fffffff
}

/**
 * The partition (0-based) a key's messages go to among `partitions`: its
 * {@link partitionHash} modulo the count. The same in every AceMQ library, so a service in
 * another language sends a key to the same queue.
 *
 * @example
 * ```ts
 * partitionFor('acct-7', 8) // 6
 * partitionFor('same', 4)   // 3
 * ```
 */
export function partitionFor(key: string, partitions: number): number {
  if (typeof key !== 'string') {
    throw new ConfigurationError(
      `partitionFor(key) must be a string; got ${describeValue(key as unknown)}`,
    )
  }
  return partitionHash(key) % validatePartitions(partitions, 'partitionFor(partitions)')
}

/** Checks a partition count: a whole number from 1 to {@link MAX_PARTITIONS}. */
export function validatePartitions(partitions: number, argumentName: string): number {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new ConfigurationError(
      `${argumentName} must be a whole number from 1 to ${MAX_PARTITIONS}; got ${describeValue(partitions)}`,
    )
  }
  return partitions
}

/** A value as an error message shows it: strings quoted, everything else with its type. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${String(value)} (${typeof value})`
  }
  if (value === null || value === undefined) return String(value)
  if (typeof value === 'function') return 'a function'
  return Array.isArray(value) ? 'an array' : 'an object'
}
