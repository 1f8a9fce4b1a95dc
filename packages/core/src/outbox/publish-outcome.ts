import { ErrorCodes, errorCodeOf } from '../error-codes.js'
import type { Transport } from '../transport/transport.js'
import type { OutboxStore } from './outbox-store.js'

/**
 * Whether a failed publish says its record was at fault — no queue took it, its exchange does
 * not exist, it cannot be encoded — rather than the channel or the broker's confirm failing
 * under it (which another record's fault can cause).
 */
export function blamesRecord(error: unknown): boolean {
  const code = errorCodeOf(error)
  return (
    code === ErrorCodes.UNROUTABLE ||
    code === ErrorCodes.EXCHANGE_NOT_FOUND ||
    code === ErrorCodes.UNENCODABLE
  )
}

/** The store's own `maxAttempts`, when it says. */
export function storeMaxAttempts(store: OutboxStore): number | undefined {
  const own = (store as { readonly maxAttempts?: unknown }).maxAttempts
  return typeof own === 'number' ? own : undefined
}

export function seconds(ms: number): string {
  return ms % 1_000 === 0 ? `${ms / 1_000} s` : `${ms} ms`
}

/** A failure of the connection, not of the record: it is handed back without counting. */
export function isConnectionTrouble(error: unknown, transport: Transport): boolean {
  const code = errorCodeOf(error)
  if (
    code === ErrorCodes.CONNECTION_BLOCKED ||
    code === ErrorCodes.PUBLISHING_PAUSED ||
    code === ErrorCodes.CLOSED
  ) {
    return true
  }
  if (error instanceof Error && error.name === 'AbortError') return true
  const state = transport.state
  return !state.open || state.closed
}
