import amqplib from 'amqplib'
import type { Options, SocketOptions } from 'amqplib'
import { ConfigurationError } from '@acemq/core'
import { passwordSpan, redactUrl } from '../redact-url.js'
import type { AmqpConnectTarget, AmqpTlsOptions } from '../amqp-transport-options.js'

/** Which of the transport's two connections. */
export type ConnectionRole = 'publish' | 'consume'

/** What amqplib's `connect` is called with. */
export interface ConnectArguments {
  readonly target: string | Options.Connect
  readonly socketOptions: SocketOptions
}

/** A resolved broker address (one node): what to show, what to hide, and how to connect. */
export interface Endpoint {
  /** The address without its password. */
  readonly description: string
  /** `host:port`, to tell two nodes apart. */
  readonly address: string
  /** `amqps://`: the connection is made over TLS. */
  readonly tls: boolean
  /** Passwords that must never leave the transport. */
  readonly secrets: readonly string[]
  /** The SASL login: `PLAIN` (user and password), or `EXTERNAL` (the client certificate). */
  readonly mechanism: string
  connectArguments(role: ConnectionRole): ConnectArguments
}

/** The nodes a transport may connect to (one, or a cluster's), validated. */
export interface NodeSet {
  readonly nodes: readonly Endpoint[]
  /** The one node's address, or `one of <a>, <b>, <c>`; never a password. */
  readonly description: string
  /** Every node's secrets. */
  readonly secrets: readonly string[]
}

export interface EndpointSettings {
  readonly heartbeatSeconds: number
  /** The heartbeat came from the options, so it wins over one in the URL. */
  readonly heartbeatExplicit: boolean
  readonly connectionName: string
  readonly connectTimeoutMs: number
  readonly socketOptions: SocketOptions | undefined
  readonly tls?: AmqpTlsOptions | undefined
}

/** The fields of amqplib's connection object (`Options.Connect`). */
const CONNECT_FIELDS = new Set([
  'protocol',
  'hostname',
  'port',
  'username',
  'password',
  'locale',
  'frameMax',
  'maxFrameSize',
  'heartbeat',
  'vhost',
  'channelMax',
  'credentials',
])

/** Fields people write that amqplib ignores, so the connection would go to localhost. */
const MISNAMED: Readonly<Record<string, string>> = {
  host: 'hostname',
  url: 'hostname and port (or pass the URL itself)',
  user: 'username',
  pass: 'password',
  virtualHost: 'vhost',
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

function defaultPort(protocol: string): number {
  return protocol === 'amqps' ? 5671 : 5672
}

function describeObject(target: Options.Connect): string {
  const protocol = (target.protocol ?? 'amqp').replace(/:$/, '')
  const hostname = target.hostname ?? 'localhost'
  const host = hostname.includes(':') ? `[${hostname}]` : hostname
  const port = target.port ?? defaultPort(protocol)
  const hasUser = target.username !== undefined || target.password !== undefined
  const auth = hasUser
    ? `${encodeURIComponent(target.username ?? '')}${target.password === undefined ? '' : ':***'}@`
    : ''
  const vhost =
    target.vhost === undefined || target.vhost === '/' ? '' : `/${encodeURIComponent(target.vhost)}`
  return `${protocol}://${auth}${host}:${port}${vhost}`
}

function credentialSecrets(options: SocketOptions | Options.Connect | undefined): string[] {
  const password = options?.credentials?.password
  return typeof password === 'string' ? [password] : []
}

function what(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  return typeof value
}

function validateObject(target: Options.Connect, label: string): void {
  for (const key of Object.keys(target)) {
    if (CONNECT_FIELDS.has(key)) continue
    const hint = MISNAMED[key]
    throw new ConfigurationError(
      `${label} has no field '${key}'${hint === undefined ? '' : ` (amqplib calls it ${hint})`}: amqplib's connection object takes ${[...CONNECT_FIELDS].join(', ')}, and ignores anything else`,
    )
  }
  if (
    target.protocol !== undefined &&
    (typeof target.protocol !== 'string' ||
      !['amqp', 'amqps'].includes(target.protocol.replace(/:$/, '')))
  ) {
    throw new ConfigurationError(
      `${label}.protocol must be 'amqp' or 'amqps'; got '${String(target.protocol)}'`,
    )
  }
  if (
    target.hostname !== undefined &&
    (typeof target.hostname !== 'string' || target.hostname === '')
  ) {
    throw new ConfigurationError(
      `${label}.hostname must be a non-empty string; got ${JSON.stringify(target.hostname)}`,
    )
  }
  if (
    target.port !== undefined &&
    (!Number.isInteger(target.port) || target.port < 1 || target.port > 65_535)
  ) {
    throw new ConfigurationError(
      `${label}.port must be an integer from 1 to 65535; got ${JSON.stringify(target.port)}`,
    )
  }
  for (const key of ['username', 'password', 'vhost', 'locale'] as const) {
    const value: unknown = target[key]
    if (value !== undefined && typeof value !== 'string') {
      throw new ConfigurationError(`${label}.${key} must be a string; got ${what(value)}`)
    }
  }
}

const BINARY = (value: unknown): boolean => typeof value === 'string' || Buffer.isBuffer(value)

/** Checks the `tls` option's fields, so a typo fails at construction rather than at the handshake. */
function validateTls(tls: AmqpTlsOptions | undefined): void {
  if (tls === undefined) return
  if (typeof tls !== 'object' || tls === null || Array.isArray(tls)) {
    throw new ConfigurationError(`tls must be an object; got ${what(tls)}`)
  }
  const known = ['ca', 'cert', 'key', 'passphrase', 'servername', 'externalAuth']
  for (const key of Object.keys(tls)) {
    if (!known.includes(key)) {
      throw new ConfigurationError(`tls has no field '${key}': it takes ${known.join(', ')}`)
    }
  }
  const ca: unknown = tls.ca
  if (ca !== undefined && !BINARY(ca) && !(Array.isArray(ca) && ca.every(BINARY))) {
    throw new ConfigurationError('tls.ca must be PEM text, a Buffer, or a list of them')
  }
  for (const key of ['cert', 'key'] as const) {
    if (tls[key] !== undefined && !BINARY(tls[key])) {
      throw new ConfigurationError(`tls.${key} must be PEM text or a Buffer`)
    }
  }
  for (const key of ['passphrase', 'servername'] as const) {
    const value: unknown = tls[key]
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new ConfigurationError(`tls.${key} must be a non-empty string`)
    }
  }
  if (tls.externalAuth !== undefined && typeof tls.externalAuth !== 'boolean') {
    throw new ConfigurationError(
      `tls.externalAuth must be a boolean; got ${what(tls.externalAuth)}`,
    )
  }
  if (tls.externalAuth === true && (tls.cert === undefined || tls.key === undefined)) {
    throw new ConfigurationError(
      'tls.externalAuth logs in with the client certificate: give tls.cert and tls.key too',
    )
  }
}

/** The socket options TLS adds: verification is on unless `socketOptions` turns it off. */
function tlsSocketOptions(
  tls: AmqpTlsOptions | undefined,
  base: SocketOptions,
): Record<string, unknown> {
  const options: Record<string, unknown> = {
    // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment never turns it off quietly.
    rejectUnauthorized: (base as { rejectUnauthorized?: unknown }).rejectUnauthorized !== false,
  }
  if (tls === undefined) return options
  for (const key of ['ca', 'cert', 'key', 'passphrase', 'servername'] as const) {
    if (tls[key] !== undefined) options[key] = tls[key]
  }
  if (tls.externalAuth === true) options['credentials'] = amqplib.credentials.external()
  return options
}

/**
 * Validates one connect target, at construction, and prepares both connections' arguments.
 * `label` names it in errors (`url`, or `url[1]` in a list).
 */
export function resolveEndpoint(
  target: AmqpConnectTarget,
  settings: EndpointSettings,
  label = 'url',
): Endpoint {
  const secrets: string[] = [...credentialSecrets(settings.socketOptions)]
  let description: string
  let address: string
  let tls: boolean
  let build: () => string | Options.Connect

  if (typeof target === 'string') {
    description = redactUrl(target)
    // The password as written, read as redactUrl reads it: when it holds an unescaped `/`, `?`
    // or `#`, the URL parser sees a different (wrong) password, or none, and parts of the real
    // one land in the host, path or query. Both readings are secrets.
    const span = passwordSpan(target)
    if (span !== undefined) {
      const written = target.slice(span.start, span.end)
      secrets.push(written, safeDecode(written))
    }
    let parsed: URL
    try {
      parsed = new URL(target)
    } catch {
      throw new ConfigurationError(
        `${label} must be an amqp:// or amqps:// URL (percent-encode a password that holds '/', '?', '#', '@' or '%': encodeURIComponent(password)); got '${description}'`,
      )
    }
    if (parsed.protocol !== 'amqp:' && parsed.protocol !== 'amqps:') {
      throw new ConfigurationError(
        `${label} must use the amqp:// or amqps:// scheme; got '${description}'`,
      )
    }
    // amqplib would connect a URL without a host to localhost.
    if (parsed.hostname === '') {
      throw new ConfigurationError(
        `${label} has no host (write it amqp://host:port/vhost); got '${description}'`,
      )
    }
    if (parsed.password !== '') secrets.push(parsed.password, safeDecode(parsed.password))
    if (settings.heartbeatExplicit || !parsed.searchParams.has('heartbeat')) {
      parsed.searchParams.set('heartbeat', String(settings.heartbeatSeconds))
    }
    tls = parsed.protocol === 'amqps:'
    address = `${parsed.hostname}:${parsed.port || defaultPort(tls ? 'amqps' : 'amqp')}`
    const withHeartbeat = parsed.toString()
    build = () => withHeartbeat
  } else if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
    validateObject(target, label)
    description = describeObject(target)
    const protocol = (target.protocol ?? 'amqp').replace(/:$/, '')
    tls = protocol === 'amqps'
    address = `${target.hostname ?? 'localhost'}:${target.port ?? defaultPort(protocol)}`
    if (typeof target.password === 'string') secrets.push(target.password)
    secrets.push(...credentialSecrets(target))
    const withHeartbeat: Options.Connect =
      settings.heartbeatExplicit || target.heartbeat === undefined
        ? { ...target, heartbeat: settings.heartbeatSeconds }
        : { ...target }
    build = () => withHeartbeat
  } else {
    throw new ConfigurationError(
      `${label} must be an amqp:// URL or an amqplib connection object; got ${what(target)}`,
    )
  }

  if (settings.tls !== undefined && !tls) {
    throw new ConfigurationError(
      `the tls option is given but ${label} ('${description}') is not amqps://: the connection would not use TLS`,
    )
  }
  // A password that is the user name is not hidden in prose (URLs still hide it): hints name
  // the user, and `rabbitmqctl set_permissions … 'guest'` must stay pasteable (docs/design.md §19).
  const user = userOf(target)
  const unique = [...new Set(secrets.filter((secret) => secret !== '' && secret !== user))]
  const mechanism =
    tls && settings.tls?.externalAuth === true
      ? 'EXTERNAL'
      : (settings.socketOptions?.credentials?.mechanism ?? 'PLAIN')
  return {
    description,
    address,
    tls,
    mechanism,
    secrets: unique,
    connectArguments(role) {
      const base = settings.socketOptions ?? {}
      return {
        target: build(),
        socketOptions: {
          // Nagle's algorithm holds a write behind an unacknowledged one: a channel.close
          // after a nack (for which the broker sends nothing back) then waited ~40 ms for
          // the delayed TCP ACK on every close. An explicit noDelay: false still wins.
          noDelay: true,
          ...base,
          ...(tls ? tlsSocketOptions(settings.tls, base) : {}),
          timeout: settings.connectTimeoutMs,
          clientProperties: {
            ...base.clientProperties,
            connection_name: `${settings.connectionName} (${role})`,
          },
        },
      }
    },
  }
}

/**
 * Validates one target or a list of a cluster's nodes. A list must hold at least one node,
 * each one once, all `amqp://` or all `amqps://` (a plain node in a TLS list would quietly
 * drop encryption for whichever connection lands on it).
 */
export function resolveNodes(
  target: AmqpConnectTarget | readonly AmqpConnectTarget[],
  settings: EndpointSettings,
): NodeSet {
  validateTls(settings.tls)
  if (!Array.isArray(target)) {
    const node = resolveEndpoint(target as AmqpConnectTarget, settings)
    return { nodes: [node], description: node.description, secrets: node.secrets }
  }
  const list = target as readonly unknown[]
  if (list.length === 0) {
    throw new ConfigurationError('url must list at least one node; got an empty list')
  }
  const nodes = list.map((item, index) =>
    resolveEndpoint(item as AmqpConnectTarget, settings, `url[${index}]`),
  )
  const first = nodes[0] as Endpoint
  nodes.forEach((node, index) => {
    if (node.tls !== first.tls) {
      throw new ConfigurationError(
        `every node must use the same scheme: url[0] is ${first.tls ? 'amqps' : 'amqp'}:// but url[${index}] ('${node.description}') is ${node.tls ? 'amqps' : 'amqp'}://`,
      )
    }
    const earlier = nodes.findIndex((other) => other.address === node.address)
    if (earlier !== index) {
      throw new ConfigurationError(
        `url[${index}] names ${node.address} twice (url[${earlier}] too): list each node once`,
      )
    }
  })
  const description =
    nodes.length === 1
      ? first.description
      : `one of ${nodes.map((node) => node.description).join(', ')}`
  return {
    nodes,
    description,
    secrets: [...new Set(nodes.flatMap((node) => node.secrets))],
  }
}

/** The user name of a connect target, decoded; undefined when it names none. */
function userOf(target: AmqpConnectTarget): string | undefined {
  if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
    return typeof target.username === 'string' ? target.username : undefined
  }
  if (typeof target !== 'string') return undefined
  const schemeEnd = target.indexOf('://')
  const span = passwordSpan(target)
  if (schemeEnd < 0 || span === undefined) return undefined
  return safeDecode(target.slice(schemeEnd + 3, span.start - 1))
}
