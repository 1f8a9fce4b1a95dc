import {
  ConfigurationError,
  Topology,
  type AceMq,
  type Duration,
  type HealthContributor,
  type Instrumentation,
  type PublisherOptions,
} from '@acemq/core'
import { DEFAULT_DRAIN_TIMEOUT, toMillis } from '@acemq/core/spi'

/**
 * The name of the connection a module, a consumer or an injection means when it names none:
 * `'default'`.
 *
 * @example
 * ```ts
 * AceMqModule.forRoot({ name: DEFAULT_CONNECTION_NAME, connect: () => connect(url) })
 * ```
 */
export const DEFAULT_CONNECTION_NAME = 'default'

/**
 * How long the first connection attempts wait between them when the broker is down at start
 * (`failFast: false`): 1 s, doubling to {@link DEFAULT_CONNECT_RETRY_MAX_DELAY}.
 *
 * @example
 * ```ts
 * AceMqModule.forRoot({ connect, connectRetry: { initialDelay: DEFAULT_CONNECT_RETRY_DELAY } })
 * ```
 */
export const DEFAULT_CONNECT_RETRY_DELAY = 1_000

/**
 * The longest wait between two first connection attempts: 30 s.
 *
 * @example
 * ```ts
 * AceMqModule.forRoot({ connect, connectRetry: { maxDelay: DEFAULT_CONNECT_RETRY_MAX_DELAY } })
 * ```
 */
export const DEFAULT_CONNECT_RETRY_MAX_DELAY = 30_000

/**
 * Where the plain health endpoint answers when `healthEndpoint: true`: `/acemq-health`.
 *
 * @example
 * ```ts
 * await fetch(`http://localhost:3000${DEFAULT_NEST_HEALTH_PATH}`)
 * ```
 */
export const DEFAULT_NEST_HEALTH_PATH = '/acemq-health'

/**
 * A publisher the module registers as a provider, injected with `@InjectPublisher(name)`.
 *
 * @example
 * ```ts
 * const orders: PublisherDefinition = { exchange: '', routingKey: 'orders.placed' }
 * ```
 */
export interface PublisherDefinition {
  readonly exchange: string
  readonly routingKey: string
  readonly options?: PublisherOptions
}

/**
 * What a connection is made of: everything `AceMqModule.forRoot` takes except its `name`,
 * `publishers` and `healthEndpoint` (which Nest must know before any factory runs), and what
 * the `useFactory` of `forRootAsync` returns.
 *
 * @example
 * ```ts
 * const options: AceMqConnectionOptions = {
 *   connect: () => connect(process.env.AMQP_URL ?? 'amqp://localhost'),
 *   topology: Topology.define().queueWithRetry('orders.placed', policy),
 *   shutdownGrace: '20s',
 * }
 * ```
 */
export interface AceMqConnectionOptions {
  /**
   * Opens the connection: `() => connect(url, options)` from `@acemq/transport-amqp`, or
   * `() => AceMq.connect(transport)` for any transport. Called again, after a wait, when it
   * rejects at start and `failFast` is off.
   */
  readonly connect: () => Promise<AceMq>
  /** Declared once connected, before any consumer starts. */
  readonly topology?: Topology
  /** Installed on the connection once connected (`@acemq/otel`'s, say). */
  readonly instrumentation?: Instrumentation
  /** Registered with `mq.registerHealth()` once connected: a store's `healthContributor()`. */
  readonly healthContributors?: readonly HealthContributor[]
  /**
   * Run once connected, after the topology and before the `@Consume()` handlers start: ordered
   * queues, pipelines and outbox relays are set up here as in plain code.
   */
  readonly onConnected?: (mq: AceMq) => void | Promise<void>
  /**
   * `true`: a connection that cannot be made at start fails the application's bootstrap.
   * `false` (default): the application starts, health says `DOWN`, and the connection is tried
   * again (`connectRetry`); consumers start when it is made.
   */
  readonly failFast?: boolean
  /** Waits between first connection attempts (defaults 1 s doubling to 30 s). */
  readonly connectRetry?: { readonly initialDelay?: Duration; readonly maxDelay?: Duration }
  /**
   * How long the application's shutdown waits for running handlers before closing the
   * connection (default `DEFAULT_DRAIN_TIMEOUT`, 20 s, from `@acemq/core`).
   */
  readonly shutdownGrace?: Duration
}

/**
 * Options of `AceMqModule.forRoot`.
 *
 * @example
 * ```ts
 * AceMqModule.forRoot({
 *   connect: () => connect('amqp://localhost'),
 *   publishers: { orders: { exchange: '', routingKey: 'orders.placed' } },
 *   healthEndpoint: true,
 * })
 * ```
 */
export interface AceMqModuleOptions extends AceMqConnectionOptions {
  /** The connection's name, for applications with several (default `'default'`). */
  readonly name?: string
  /** Publishers to inject with `@InjectPublisher(key, connection?)`, by key. */
  readonly publishers?: Readonly<Record<string, PublisherDefinition>>
  /** `true` or a path: serve `GET /acemq-health` (or that path) from a controller. */
  readonly healthEndpoint?: boolean | string
}

/** The checked form of {@link AceMqConnectionOptions}. */
export interface ResolvedConnectionOptions {
  readonly connect: () => Promise<AceMq>
  readonly topology: Topology | undefined
  readonly instrumentation: Instrumentation | undefined
  readonly healthContributors: readonly HealthContributor[]
  readonly onConnected: ((mq: AceMq) => void | Promise<void>) | undefined
  readonly failFast: boolean
  readonly retryInitialMs: number
  readonly retryMaxMs: number
  readonly shutdownGraceMs: number
}

const CONNECTION_KEYS = new Set([
  'connect',
  'topology',
  'instrumentation',
  'healthContributors',
  'onConnected',
  'failFast',
  'connectRetry',
  'shutdownGrace',
])
const MODULE_KEYS = new Set([...CONNECTION_KEYS, 'name', 'publishers', 'healthEndpoint'])

/** Shows a value in an error message without throwing on odd ones. */
export function describeValue(value: unknown): string {
  if (typeof value === 'function') return `a function (${value.name || 'anonymous'})`
  if (typeof value === 'string') return JSON.stringify(value)
  if (value === null || typeof value !== 'object') return String(value)
  if (Array.isArray(value)) return 'an array'
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object'
}

/** Checks a connection name; `where` says which call it came from. */
export function checkConnectionName(name: unknown, where: string): string {
  if (typeof name !== 'string' || name.trim() === '') {
    throw new ConfigurationError(`${where} must be a non-empty string; got ${describeValue(name)}`)
  }
  return name
}

/**
 * Checks the static part of `forRoot` / `forRootAsync` options at the call: the name, the
 * publishers and the health endpoint, which decide the providers.
 */
export function checkModuleShape(
  options: unknown,
  where: string,
  keys: ReadonlySet<string> = MODULE_KEYS,
): {
  readonly name: string
  readonly publishers: Readonly<Record<string, PublisherDefinition>>
  readonly healthPath: string | undefined
} {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigurationError(`${where} must be an object; got ${describeValue(options)}`)
  }
  const record = options as Record<string, unknown>
  for (const key of Object.keys(record)) {
    if (!keys.has(key)) {
      throw new ConfigurationError(
        `${where}.${key} is not an option; the options are ${[...keys].join(', ')}`,
      )
    }
  }
  const name =
    record.name === undefined
      ? DEFAULT_CONNECTION_NAME
      : checkConnectionName(record.name, `${where}.name`)
  const publishers = checkPublishers(record.publishers, `${where}.publishers`)
  const endpoint = record.healthEndpoint
  let healthPath: string | undefined
  if (endpoint === true) healthPath = DEFAULT_NEST_HEALTH_PATH
  else if (typeof endpoint === 'string' && endpoint.startsWith('/')) healthPath = endpoint
  else if (endpoint !== undefined && endpoint !== false) {
    throw new ConfigurationError(
      `${where}.healthEndpoint must be true, false or a path starting with '/'; got ${describeValue(endpoint)}`,
    )
  }
  return { name, publishers, healthPath }
}

function checkPublishers(
  value: unknown,
  where: string,
): Readonly<Record<string, PublisherDefinition>> {
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigurationError(
      `${where} must be an object of publishers by key; got ${describeValue(value)}`,
    )
  }
  for (const [key, definition] of Object.entries(value as Record<string, unknown>)) {
    const at = `${where}.${key}`
    if (typeof definition !== 'object' || definition === null) {
      throw new ConfigurationError(
        `${at} must be { exchange, routingKey }; got ${describeValue(definition)}`,
      )
    }
    const { exchange, routingKey } = definition as Record<string, unknown>
    if (typeof exchange !== 'string') {
      throw new ConfigurationError(
        `${at}.exchange must be a string ('' for the default exchange); got ${describeValue(exchange)}`,
      )
    }
    if (typeof routingKey !== 'string') {
      throw new ConfigurationError(
        `${at}.routingKey must be a string; got ${describeValue(routingKey)}`,
      )
    }
  }
  return value as Readonly<Record<string, PublisherDefinition>>
}

/**
 * Checks the options a connection is made from (those of `forRoot`, or what the factory of
 * `forRootAsync` returned), naming the bad one; runs at bootstrap.
 */
export function resolveConnectionOptions(
  options: unknown,
  where: string,
): ResolvedConnectionOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigurationError(`${where} must be an object; got ${describeValue(options)}`)
  }
  const record = options as Record<string, unknown>
  const connect = record.connect
  if (typeof connect !== 'function') {
    throw new ConfigurationError(
      `${where}.connect must be a function that opens the connection, e.g. () => connect('amqp://localhost'); got ${describeValue(connect)}`,
    )
  }
  const topology = record.topology
  if (topology !== undefined && !(topology instanceof Topology)) {
    throw new ConfigurationError(
      `${where}.topology must be a Topology (Topology.define()...); got ${describeValue(topology)}`,
    )
  }
  const instrumentation = record.instrumentation
  if (
    instrumentation !== undefined &&
    (typeof instrumentation !== 'object' || instrumentation === null)
  ) {
    throw new ConfigurationError(
      `${where}.instrumentation must be an Instrumentation; got ${describeValue(instrumentation)}`,
    )
  }
  const contributors = record.healthContributors ?? []
  if (
    !Array.isArray(contributors) ||
    contributors.some(
      (c: unknown) =>
        typeof c !== 'object' ||
        c === null ||
        typeof (c as HealthContributor).report !== 'function',
    )
  ) {
    throw new ConfigurationError(
      `${where}.healthContributors must be an array of { name, report() } (a store's healthContributor()); got ${describeValue(contributors)}`,
    )
  }
  const onConnected = record.onConnected
  if (onConnected !== undefined && typeof onConnected !== 'function') {
    throw new ConfigurationError(
      `${where}.onConnected must be a function (mq) => …; got ${describeValue(onConnected)}`,
    )
  }
  const failFast = record.failFast ?? false
  if (typeof failFast !== 'boolean') {
    throw new ConfigurationError(
      `${where}.failFast must be a boolean; got ${describeValue(failFast)}`,
    )
  }
  const retry = (record.connectRetry ?? {}) as Record<string, unknown>
  if (typeof retry !== 'object' || retry === null) {
    throw new ConfigurationError(
      `${where}.connectRetry must be { initialDelay?, maxDelay? }; got ${describeValue(retry)}`,
    )
  }
  const retryInitialMs = toMillis(
    (retry.initialDelay ?? DEFAULT_CONNECT_RETRY_DELAY) as Duration,
    `${where}.connectRetry.initialDelay`,
  )
  const retryMaxMs = toMillis(
    (retry.maxDelay ?? DEFAULT_CONNECT_RETRY_MAX_DELAY) as Duration,
    `${where}.connectRetry.maxDelay`,
  )
  if (retryInitialMs <= 0 || retryMaxMs < retryInitialMs) {
    throw new ConfigurationError(
      `${where}.connectRetry needs 0 < initialDelay <= maxDelay; got ${retryInitialMs} ms and ${retryMaxMs} ms`,
    )
  }
  const shutdownGraceMs = toMillis(
    (record.shutdownGrace ?? DEFAULT_DRAIN_TIMEOUT) as Duration,
    `${where}.shutdownGrace`,
  )
  return {
    connect: connect as () => Promise<AceMq>,
    topology,
    instrumentation: instrumentation as Instrumentation | undefined,
    healthContributors: contributors as readonly HealthContributor[],
    onConnected: onConnected as ((mq: AceMq) => void | Promise<void>) | undefined,
    failFast,
    retryInitialMs,
    retryMaxMs,
    shutdownGraceMs,
  }
}

/** The keys a `forRootAsync` factory may return. */
export const CONNECTION_OPTION_KEYS: ReadonlySet<string> = CONNECTION_KEYS
