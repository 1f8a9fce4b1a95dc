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
 * Where the transport connects: one node, or a list of a RabbitMQ cluster's nodes (each an
 * `amqp://` / `amqps://` URL or an amqplib connection object; every one `amqp://` or every one
 * `amqps://`, each node once). Each of the two connections goes to a node that answers, and
 * recovery moves it to another when its node dies (see {@link AmqpTransportOptions.nodeOrder}).
 *
 * @example
 * ```ts
 * const nodes: AmqpConnectTargets = ['amqp://app:s3cret@rabbit-1', 'amqp://app:s3cret@rabbit-2']
 * ```
 */
export type AmqpConnectTargets = AmqpConnectTarget | readonly AmqpConnectTarget[]

/**
 * The order in which a connection tries a cluster's nodes: `shuffle` (a fresh random order on
 * every attempt, so a fleet of services spreads over the cluster) or `in-order` (as listed: a
 * primary and its fallbacks). Either way, after losing its node a connection tries the others
 * first and that node last.
 *
 * @example
 * ```ts
 * new AmqpTransport(['amqp://primary', 'amqp://standby'], { nodeOrder: 'in-order' })
 * ```
 */
export type AmqpNodeOrder = 'shuffle' | 'in-order'

/**
 * TLS for `amqps://` nodes. The broker's certificate is always verified (against `ca`, or
 * Node's trusted CAs without it, and for the name connected to or `servername`); one that does
 * not verify fails the connection with an error saying why, even when
 * `NODE_TLS_REJECT_UNAUTHORIZED=0` is set. Given with an `amqp://` node, it is refused.
 *
 * @example
 * ```ts
 * new AmqpTransport('amqps://rabbit.internal:5671', {
 *   tls: { ca: readFileSync('ca.pem'), cert: readFileSync('client.pem'), key: readFileSync('client.key'), externalAuth: true },
 * })
 * ```
 */
export interface AmqpTlsOptions {
  /** CA certificates (PEM) that verify the broker's certificate. Default: Node's trusted CAs. */
  readonly ca?: string | Buffer | readonly (string | Buffer)[]
  /** The client certificate (PEM), for a broker that asks for one. */
  readonly cert?: string | Buffer
  /** The client certificate's private key (PEM). */
  readonly key?: string | Buffer
  /** The private key's passphrase. */
  readonly passphrase?: string
  /**
   * The name the broker's certificate must hold (and the TLS SNI name). Default: the node's
   * host name (for an IP address: the address, checked against the certificate's IP entries).
   */
  readonly servername?: string
  /**
   * Log in with the client certificate (SASL `EXTERNAL`; RabbitMQ's
   * `rabbitmq_auth_mechanism_ssl` plugin) instead of the user name and password. Needs `cert`
   * and `key`. Default `false`.
   */
  readonly externalAuth?: boolean
}

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
  /** TLS for `amqps://` nodes: CA, client certificate and key, server name, certificate login. */
  readonly tls?: AmqpTlsOptions
  /** The order a connection tries a cluster's nodes in. Default {@link DEFAULT_NODE_ORDER}. */
  readonly nodeOrder?: AmqpNodeOrder
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

/**
 * The default order for trying a cluster's nodes: `shuffle`, so services spread over the
 * cluster instead of all landing on (and, with RabbitMQ's client-local queue leader
 * placement, putting every queue's leader on) the first node listed.
 *
 * @example
 * ```ts
 * new AmqpTransport(nodes, { nodeOrder: DEFAULT_NODE_ORDER })
 * ```
 */
export const DEFAULT_NODE_ORDER: AmqpNodeOrder = 'shuffle'
