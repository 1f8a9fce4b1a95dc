import { ConfigurationError, toMillis, type Duration } from '@acemq/core'

/** A plain SQL identifier, optionally schema-qualified: nothing that needs escaping anywhere. */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/

/** Checks a table name and splits it into `[schema, table]` (schema may be undefined). */
export function parseTableName(table: unknown): readonly [string | undefined, string] {
  if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
    throw new ConfigurationError(
      `table must be an SQL identifier (letters, digits and _, at most 63, not starting with a digit), optionally schema-qualified as 'schema.table'; got ${JSON.stringify(table) ?? String(table)}`,
    )
  }
  const dot = table.indexOf('.')
  return dot < 0 ? [undefined, table] : [table.slice(0, dot), table.slice(dot + 1)]
}

/** A duration option that must be longer than zero. */
export function positiveMillis(value: Duration, name: string): number {
  const ms = toMillis(value, name)
  if (ms <= 0) {
    throw new ConfigurationError(`${name} must be longer than 0 ms; got ${JSON.stringify(value)}`)
  }
  return ms
}

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

/** A lone surrogate cannot be written as UTF-8, so two different ids could become one key. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/** Ids are non-empty UTF-8 text: anything else is refused before it reaches the database. */
export function assertId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0) {
    throw new ConfigurationError(
      `id must be a non-empty string; got ${typeof id === 'string' ? '""' : describe(id)}`,
    )
  }
  if (id.includes('\u0000') || LONE_SURROGATE.test(id)) {
    throw new ConfigurationError(
      `id must be valid UTF-8 text without NUL characters; got ${JSON.stringify(id)}`,
    )
  }
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value)
  if (typeof value === 'object') return `a ${value.constructor?.name ?? 'object'}`
  return `${typeof value} ${String(value)}`
}
