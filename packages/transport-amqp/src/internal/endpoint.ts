import type { Options, SocketOptions } from 'amqplib'
import { ConfigurationError } from '@acemq/core'
import { passwordSpan, redactUrl } from '../redact-url.js'
import type { AmqpConnectTarget } from '../amqp-transport-options.js'

/** Which of the transport's two connections. */
export type ConnectionRole = 'publish' | 'consume'

/** What amqplib's `connect` is called with. */
export interface ConnectArguments {
  readonly target: string | Options.Connect
  readonly socketOptions: SocketOptions
}

/** A resolved broker address: what to show, what to hide, and how to connect. */
export interface Endpoint {
  /** The address without its password. */
  readonly description: string
  /** Passwords that must never leave the transport. */
  readonly secrets: readonly string[]
  connectArguments(role: ConnectionRole): ConnectArguments
}

export interface EndpointSettings {
  readonly heartbeatSeconds: number
  /** The heartbeat came from the options, so it wins over one in the URL. */
  readonly heartbeatExplicit: boolean
  readonly connectionName: string
  readonly connectTimeoutMs: number
  readonly socketOptions: SocketOptions | undefined
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

function describeObject(target: Options.Connect): string {
  const protocol = (target.protocol ?? 'amqp').replace(/:$/, '')
  const hostname = target.hostname ?? 'localhost'
  const host = hostname.includes(':') ? `[${hostname}]` : hostname
  const port = target.port ?? (protocol === 'amqps' ? 5671 : 5672)
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

/** Validates the connect target once, at construction, and prepares both connections' arguments. */
export function resolveEndpoint(target: AmqpConnectTarget, settings: EndpointSettings): Endpoint {
  const secrets: string[] = [...credentialSecrets(settings.socketOptions)]
  let description: string
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
        `url must be an amqp:// or amqps:// URL (percent-encode a password that holds '/', '?', '#', '@' or '%': encodeURIComponent(password)); got '${description}'`,
      )
    }
    if (parsed.protocol !== 'amqp:' && parsed.protocol !== 'amqps:') {
      throw new ConfigurationError(
        `url must use the amqp:// or amqps:// scheme; got '${description}'`,
      )
    }
    if (parsed.password !== '') secrets.push(parsed.password, safeDecode(parsed.password))
    if (settings.heartbeatExplicit || !parsed.searchParams.has('heartbeat')) {
      parsed.searchParams.set('heartbeat', String(settings.heartbeatSeconds))
    }
    const withHeartbeat = parsed.toString()
    build = () => withHeartbeat
  } else if (typeof target === 'object' && target !== null) {
    if (
      target.protocol !== undefined &&
      !['amqp', 'amqps'].includes(target.protocol.replace(/:$/, ''))
    ) {
      throw new ConfigurationError(
        `url.protocol must be 'amqp' or 'amqps'; got '${target.protocol}'`,
      )
    }
    description = describeObject(target)
    if (typeof target.password === 'string') secrets.push(target.password)
    secrets.push(...credentialSecrets(target))
    const withHeartbeat: Options.Connect =
      settings.heartbeatExplicit || target.heartbeat === undefined
        ? { ...target, heartbeat: settings.heartbeatSeconds }
        : { ...target }
    build = () => withHeartbeat
  } else {
    throw new ConfigurationError(
      `url must be an amqp:// URL or an amqplib connection object; got ${typeof target}`,
    )
  }

  const unique = [...new Set(secrets.filter((secret) => secret !== ''))]
  return {
    description,
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
