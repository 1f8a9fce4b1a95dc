import type { TransportEvent } from '@acemq/core/spi'
import type { ConnectionRole } from './endpoint.js'
import type { ConnectionHooks, ManagedConnection } from './managed-connection.js'

/**
 * The transport's lifecycle: `new` until `connect()`, `connecting` while both connections open
 * for the first time, `connected` from then on (each connection recovers on its own while the
 * transport stays `connected`), `closed` once `close()` starts or a first connect fails.
 */
export type Phase = 'new' | 'connecting' | 'connected' | 'closed'

/**
 * What the publish side and the consume side ask of the transport that holds them: its
 * lifecycle, its events and its logger, shared by both connections.
 */
export interface SideHost {
  /** Where the transport connects, passwords hidden (for messages). */
  description(): string
  phase(): Phase
  /** Opens this side's connection (one of two: `publish` or `consume`). */
  connection(role: ConnectionRole, hooks: ConnectionHooks): ManagedConnection
  /** A connection came up or went down: report `disconnected` / `reconnected` if that changed. */
  refreshOpen(error: Error | undefined): void
  emit(event: TransportEvent): void
  /** `error` with every password removed from its message. */
  safeError(error: Error | undefined): Error | undefined
  /** `text` with every password removed. */
  scrub(text: string): string
  warn(message: string): void
  /** A connection was lost for good (recovery is off): the transport closes. */
  close(): Promise<void>
}
