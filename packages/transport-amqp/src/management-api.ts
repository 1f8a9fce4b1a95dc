import { ConfigurationError } from '@acemq/core'
import { redactUrl } from '@acemq/core/spi'

/** The management API's port beside AMQP's 5672 (plain HTTP). */
export const DEFAULT_MANAGEMENT_PORT = 15_672

/** The management API's port beside AMQPS's 5671 (HTTPS). */
export const DEFAULT_MANAGEMENT_TLS_PORT = 15_671

/** How long one request to the management API may take. */
export const DEFAULT_MANAGEMENT_TIMEOUT_MS = 10_000

/** Queues asked for per page: a vhost with thousands of queues is read in pages. */
const PAGE_SIZE = 500

/** Where the management API is and how to log in, without the password in `url`. */
export interface ManagementEndpoint {
  /** `http(s)://host:port` with no user information: safe to print. */
  readonly url: string
  readonly user: string
  readonly password: string
  /** Whether it was derived from the AMQP URL (no `--management-url`). */
  readonly derived: boolean
}

/** A dead-letter or parked queue as the management API reports it. */
export interface DiscoveredQueue {
  readonly queue: string
  /** `classic`, `quorum` or `stream`. */
  readonly type: string
  /** Messages ready and unacknowledged; undefined until the broker has reported its statistics. */
  readonly messages: number | undefined
  readonly consumers: number | undefined
  /**
   * How old the message at the head is, from its AMQP `timestamp` property: RabbitMQ reports it
   * for classic queues only, and only for a message that has one.
   */
  readonly oldestAgeMs: number | undefined
}

/**
 * The management API for the broker of `amqpUrl`: `explicit` when given (its user information,
 * if any, is the login), else the AMQP host on port 15672 (15671 over TLS for `amqps:`). The
 * login defaults to the AMQP URL's user and password (`guest`/`guest` when it has none, as
 * amqplib's). Throws a `ConfigurationError` naming the value when `explicit` is no http(s) URL.
 *
 * @example
 * ```ts
 * managementEndpoint('amqp://ops:s3cret@rabbit:5672/orders')
 * // { url: 'http://rabbit:15672', user: 'ops', password: 's3cret', derived: true }
 * ```
 */
export function managementEndpoint(amqpUrl: string, explicit?: string): ManagementEndpoint {
  const amqp = parse(amqpUrl, '--url')
  const login = {
    user: amqp.username === '' ? 'guest' : decode(amqp.username),
    password: amqp.username === '' ? 'guest' : decode(amqp.password),
  }
  if (explicit === undefined) {
    const tls = amqp.protocol === 'amqps:'
    const port = tls ? DEFAULT_MANAGEMENT_TLS_PORT : DEFAULT_MANAGEMENT_PORT
    return {
      url: `${tls ? 'https' : 'http'}://${amqp.host.replace(/:\d+$/, '')}:${port}`,
      ...login,
      derived: true,
    }
  }
  const management = parse(explicit, '--management-url')
  if (management.protocol !== 'http:' && management.protocol !== 'https:') {
    throw new ConfigurationError(
      `--management-url must be an http:// or https:// URL; got '${redactUrl(explicit)}'`,
    )
  }
  const path = management.pathname.replace(/\/+$/, '')
  return {
    url: `${management.protocol}//${management.host}${path}`,
    ...(management.username === ''
      ? login
      : { user: decode(management.username), password: decode(management.password) }),
    derived: false,
  }
}

/**
 * Every queue of `vhost` whose name ends in `.dlq` or `.parked`, sorted by name, read in pages
 * from the RabbitMQ management plugin's HTTP API (AMQP cannot list queues). Errors name the
 * API's URL and the user, never the password.
 *
 * @example
 * ```ts
 * const queues = await discoverDeadLetterQueues(managementEndpoint(url), 'orders')
 * ```
 */
export async function discoverDeadLetterQueues(
  endpoint: ManagementEndpoint,
  vhost: string,
  now = Date.now(),
): Promise<DiscoveredQueue[]> {
  const found: DiscoveredQueue[] = []
  for (let page = 1; ; page++) {
    const query = new URLSearchParams({
      page: String(page),
      page_size: String(PAGE_SIZE),
      name: String.raw`\.(dlq|parked)$`,
      use_regex: 'true',
      columns: 'name,type,messages,consumers,head_message_timestamp',
    })
    const body = (await getJson(
      endpoint,
      `/api/queues/${encodeURIComponent(vhost)}?${query.toString()}`,
      vhost,
    )) as { items?: unknown; page_count?: unknown }
    if (!Array.isArray(body.items)) {
      throw new Error(`the management API at ${endpoint.url} answered no list of queues`)
    }
    for (const item of body.items as Record<string, unknown>[]) {
      const name = item['name']
      // The regex is the server's: the suffix is checked here too, whatever it matched.
      if (typeof name !== 'string' || !/\.(dlq|parked)$/.test(name)) continue
      const timestamp = numberOrUndefined(item['head_message_timestamp'])
      found.push({
        queue: name,
        type: typeof item['type'] === 'string' ? item['type'] : 'classic',
        messages: numberOrUndefined(item['messages']),
        consumers: numberOrUndefined(item['consumers']),
        oldestAgeMs: timestamp === undefined ? undefined : Math.max(0, now - timestamp * 1_000),
      })
    }
    const pages = numberOrUndefined(body.page_count) ?? 1
    if (page >= pages) break
  }
  return found.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : 0))
}

async function getJson(
  endpoint: ManagementEndpoint,
  path: string,
  vhost: string,
): Promise<unknown> {
  const where = `the management API at ${endpoint.url}`
  let response: Response
  try {
    response = await fetch(`${endpoint.url}${path}`, {
      headers: {
        authorization: `Basic ${Buffer.from(`${endpoint.user}:${endpoint.password}`).toString('base64')}`,
        accept: 'application/json',
      },
      signal: AbortSignal.timeout(DEFAULT_MANAGEMENT_TIMEOUT_MS),
    })
  } catch (error) {
    const reason = (error as { cause?: { code?: string } }).cause?.code ?? messageOf(error)
    const hint = endpoint.derived
      ? ' (is the rabbitmq_management plugin enabled? give its address with --management-url, or name the queues with --queues)'
      : ''
    throw new Error(`${where} did not answer: ${reason}${hint}`, { cause: error })
  }
  if (response.status === 401) {
    throw new Error(`${where} refused the login of user '${endpoint.user}' (401)`)
  }
  if (response.status === 404) {
    throw new Error(`${where} knows no virtual host '${vhost}' (404)`)
  }
  if (!response.ok) {
    throw new Error(`${where} answered ${response.status} ${response.statusText}`)
  }
  return response.json()
}

function parse(value: string, option: string): URL {
  try {
    return new URL(value)
  } catch {
    throw new ConfigurationError(`${option} is not a URL: '${redactUrl(value)}'`)
  }
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
