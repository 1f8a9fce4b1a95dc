import type { Options, SocketOptions } from 'amqplib'
import type { Duration } from '@acemq/core'

/**
 * Where the transport connects: an `amqp://` or `amqps://` URL, or amqplib's connection
 * object (`{ hostname, port, username, password, vhost, ... }`).
 *
 * @example
 * ```ts
 * const target: AmqpConnectTarget = 'amqp://app:s3cret@rabbit:5672/orders'
 * ```
 */
export type AmqpConnectTarget = string | Options.Connect

/**
 * How the transport reconnects after losing a connection: exponential backoff (factor 2, ±20 %
 * jitter) from `initialDelay` up to `maxDelay`, forever, until `close()`.
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { recovery: { initialDelay: '250ms', maxDelay: '10s' } })
 * ```
 */
export interface AmqpRecoveryOptions {
  /** The wait before the first reconnect attempt. Default {@link DEFAULT_RECOVERY_INITIAL_DELAY}. */
  readonly initialDelay?: Duration
  /** The longest wait between two attempts. Default {@link DEFAULT_RECOVERY_MAX_DELAY}. */
  readonly maxDelay?: Duration
}

/**
 * Where the transport's warnings go: a replayed declaration the broker refused after a
 * reconnect, a consumer that could not be re-subscribed yet, a delivery callback that threw.
 * Messages never contain a password.
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { logger: { warn: (message) => log.warn(message) } })
 * ```
 */
export interface AmqpTransportLogger {
  warn(message: string): void
}

/**
 * Options for {@link AmqpTransport}. Every one is optional; durations are milliseconds or
 * strings with a unit (`'10s'`).
 *
 * @example
 * ```ts
 * new AmqpTransport('amqp://rabbit', {
 *   connectionName: 'orders-service',
 *   heartbeat: '10s',
 *   maxUnconfirmed: 500,
 *   recovery: { initialDelay: '500ms', maxDelay: '30s' },
 * })
 * ```
 */
export interface AmqpTransportOptions {
  /**
   * How many publishes may wait for their broker confirm at once **on each lane** (application
   * publishes, and the engine's retries and moves, each have a window of this size, so a full
   * application window never holds a retry back); further publishes wait for room. Default
   * `DEFAULT_MAX_UNCONFIRMED` (1000) from `@acemq/core`.
   */
  readonly maxUnconfirmed?: number
  /**
   * The AMQP heartbeat interval, rounded up to whole seconds; `0` turns heartbeats off (not
   * advised: a dead peer is then only noticed by TCP). Overrides a `heartbeat` in the URL.
   * Default {@link DEFAULT_HEARTBEAT}.
   */
  readonly heartbeat?: Duration
  /**
   * The client-provided connection name shown in the management UI and `rabbitmqctl
   * list_connections`; the two connections are named `<name> (publish)` and `<name> (consume)`.
   * Default `acemq@<hostname>`.
   */
  readonly connectionName?: string
  /** Reconnect backoff, or `false` to close the transport when a connection is lost. */
  readonly recovery?: AmqpRecoveryOptions | false
  /** How long one connection attempt may take (TCP, TLS and the AMQP handshake). Default {@link DEFAULT_CONNECT_TIMEOUT}. */
  readonly connectTimeout?: Duration
  /** Passed to amqplib for both connections: TLS material, `keepAlive`, `noDelay`, `clientProperties`, `credentials`. */
  readonly socketOptions?: SocketOptions
  /** Where warnings go. Default: `console.warn` with an `[acemq/transport-amqp]` prefix. */
  readonly logger?: AmqpTransportLogger
}

/**
 * The default AMQP heartbeat (10 s): a dead broker or network path is noticed within about
 * 20–30 s instead of RabbitMQ's default 60 s heartbeat (2–3 minutes).
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { heartbeat: DEFAULT_HEARTBEAT / 2 })
 * ```
 */
export const DEFAULT_HEARTBEAT = 10_000

/**
 * The default limit for one connection attempt (10 s).
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { connectTimeout: DEFAULT_CONNECT_TIMEOUT * 3 })
 * ```
 */
export const DEFAULT_CONNECT_TIMEOUT = 10_000

/**
 * The default wait before the first reconnect attempt (500 ms).
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { recovery: { initialDelay: DEFAULT_RECOVERY_INITIAL_DELAY } })
 * ```
 */
export const DEFAULT_RECOVERY_INITIAL_DELAY = 500

/**
 * The default longest wait between reconnect attempts (30 s).
 *
 * @example
 * ```ts
 * new AmqpTransport(url, { recovery: { maxDelay: DEFAULT_RECOVERY_MAX_DELAY } })
 * ```
 */
export const DEFAULT_RECOVERY_MAX_DELAY = 30_000
