import { ConfigurationError } from '@acemq/core'
import { healthAnswer, type HealthSource } from '@acemq/core/spi'

/**
 * The path {@link acemqHealth} answers on unless told otherwise: `/acemq-health`.
 *
 * @example
 * ```ts
 * await fetch(`http://localhost:3000${DEFAULT_HEALTH_PATH}`)
 * ```
 */
export const DEFAULT_HEALTH_PATH = '/acemq-health'

/**
 * The slice of an HTTP request the health endpoint reads. Express's `Request` and Node's
 * `IncomingMessage` both fit, so this package needs neither `express` nor `@types/express`.
 *
 * @example
 * ```ts
 * const request: HealthRequest = { method: 'GET', url: '/acemq-health' }
 * ```
 */
export interface HealthRequest {
  readonly method?: string | undefined
  /** Express's path relative to the mount point, without the query string. */
  readonly path?: string | undefined
  /** The raw request target; used when `path` is absent (plain `node:http`, connect). */
  readonly url?: string | undefined
}

/**
 * The slice of an HTTP response the health endpoint writes. Express's `Response` and Node's
 * `ServerResponse` both fit.
 *
 * @example
 * ```ts
 * http.createServer((req, res) => void acemqHealthHandler(mq)(req, res))
 * ```
 */
export interface HealthResponse {
  statusCode: number
  readonly headersSent?: boolean
  setHeader(name: string, value: string): unknown
  end(chunk: string): unknown
}

/**
 * Express's `next`: called by {@link acemqHealth} for every request that is not a `GET` or
 * `HEAD` of its path.
 *
 * @example
 * ```ts
 * const next: HealthNext = () => undefined
 * ```
 */
export type HealthNext = (error?: unknown) => void

/**
 * Answers a health request. Never rejects.
 *
 * @example
 * ```ts
 * const handler: HealthHandler = acemqHealthHandler(mq)
 * app.get('/healthz', handler)
 * ```
 */
export type HealthHandler = (request: HealthRequest, response: HealthResponse) => Promise<void>

/**
 * Middleware that answers `GET` and `HEAD` on its path and passes every other request on.
 * Never rejects.
 *
 * @example
 * ```ts
 * const middleware: HealthMiddleware = acemqHealth(mq)
 * app.use(middleware)
 * ```
 */
export type HealthMiddleware = (
  request: HealthRequest,
  response: HealthResponse,
  next: HealthNext,
) => Promise<void>

/**
 * Options for {@link acemqHealth}.
 *
 * @example
 * ```ts
 * app.use(acemqHealth(mq, { path: '/internal/acemq' }))
 * ```
 */
export interface AcemqHealthOptions {
  /** Where the endpoint answers, relative to where the middleware is mounted (default `/acemq-health`). */
  readonly path?: string
}

/**
 * A request handler that serves `mq.health()` as JSON: 503 only when the status is `DOWN`,
 * 200 for `UP` and `DEGRADED` (a broker that blocks publishing is `UP`, with the reason).
 * Answers whatever it is routed, so mount it with `app.get(path, handler)`, which also
 * covers `HEAD`. No broker round trip; no credentials in the body.
 *
 * @example
 * ```ts
 * import { acemqHealthHandler } from '@acemq/health-express'
 * app.get('/healthz/acemq', acemqHealthHandler(mq))
 * ```
 */
export function acemqHealthHandler(mq: HealthSource): HealthHandler {
  assertHealthSource(mq, 'acemqHealthHandler(mq)')
  return async (_request, response) => {
    const answer = await healthAnswer(mq)
    const statusCode = answer.statusCode
    const body = JSON.stringify(answer.body)
    // Something upstream already answered; writing again would throw inside Node.
    if (response.headersSent === true) return
    try {
      response.statusCode = statusCode
      response.setHeader('content-type', 'application/json; charset=utf-8')
      response.setHeader('cache-control', 'no-store')
      response.setHeader('content-length', String(Buffer.byteLength(body)))
      // Node leaves the body out of a HEAD response on its own.
      response.end(body)
    } catch {
      // The client went away mid-answer; a health probe must never take the process down.
    }
  }
}

/**
 * Express middleware for the AceMQ health endpoint: `GET` (and `HEAD`) on `path` (default
 * `/acemq-health`) answers with `mq.health()` as JSON — 503 only when it is `DOWN`, 200
 * otherwise — and every other request goes on to `next()`. A trailing slash matches too, as
 * in Express's default routing.
 *
 * @example
 * ```ts
 * import express from 'express'
 * import { acemqHealth } from '@acemq/health-express'
 *
 * const app = express()
 * app.use(acemqHealth(mq)) // GET /acemq-health
 * ```
 */
export function acemqHealth(mq: HealthSource, options: AcemqHealthOptions = {}): HealthMiddleware {
  assertHealthSource(mq, 'acemqHealth(mq)')
  if (typeof options !== 'object' || options === null) {
    throw new ConfigurationError(
      `acemqHealth(mq, options) must be an object; got ${describeValue(options)}`,
    )
  }
  const path = options.path ?? DEFAULT_HEALTH_PATH
  assertPath(path, 'acemqHealth(options.path)')
  const handler = acemqHealthHandler(mq)
  return async (request, response, next) => {
    if ((request.method === 'GET' || request.method === 'HEAD') && matches(request, path)) {
      await handler(request, response)
    } else {
      next()
    }
  }
}

function matches(request: HealthRequest, path: string): boolean {
  const requested = request.path ?? pathOf(request.url ?? '')
  return requested === path || (!path.endsWith('/') && requested === `${path}/`)
}

function pathOf(url: string): string {
  const end = url.search(/[?#]/)
  return end < 0 ? url : url.slice(0, end)
}

function assertHealthSource(mq: unknown, where: string): asserts mq is HealthSource {
  if (
    typeof mq !== 'object' ||
    mq === null ||
    typeof (mq as { health?: unknown }).health !== 'function'
  ) {
    throw new ConfigurationError(
      `${where} needs something with a health() method, such as an AceMq; got ${describeValue(mq)}`,
    )
  }
}

function assertPath(path: unknown, where: string): void {
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new ConfigurationError(
      `${where} must be a string starting with '/'; got ${describeValue(path)}`,
    )
  }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (value === null || value === undefined) return String(value)
  if (typeof value === 'object') return Object.prototype.toString.call(value)
  return `${typeof value} ${String(value)}`
}
