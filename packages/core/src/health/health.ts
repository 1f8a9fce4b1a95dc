import { REDACTED, isSecretName, redactCredentials } from '../redaction/redact-credentials.js'

/** A component's health, ordered best to worst: `UP` < `DEGRADED` < `DOWN`. */
export type HealthStatus = 'UP' | 'DEGRADED' | 'DOWN'

/**
 * One component's report. Details are strings so every AceMQ library renders them alike.
 *
 * @example
 * ```ts
 * const report: HealthReport = { name: 'billing-api', status: 'UP', details: {} }
 * ```
 */
export interface HealthReport {
  readonly name: string
  readonly status: HealthStatus
  readonly details: Readonly<Record<string, string>>
}

/**
 * Something that reports on its own health, registered with `mq.registerHealth()`. A
 * contributor that throws (or rejects) is reported `DOWN` with the error in `details.error`.
 *
 * @example
 * ```ts
 * mq.registerHealth({ name: 'cache', report: () => ({ name: 'cache', status: 'UP', details: {} }) })
 * ```
 */
export interface HealthContributor {
  readonly name: string
  report(): HealthReport | Promise<HealthReport>
}

/** The aggregate: the worst status among the reports. */
export interface HealthResult {
  readonly status: HealthStatus
  readonly inFlight: number
  readonly reports: readonly HealthReport[]
}

/** Anything that can answer `health()`; what the HTTP adapters need of an `AceMq`. */
export interface HealthSource {
  health(): Promise<HealthResult>
}

/** The JSON the HTTP endpoints serve. */
export interface HealthJson {
  readonly status: HealthStatus
  readonly inFlight: number
  readonly components: Readonly<
    Record<string, { readonly status: HealthStatus } & Readonly<Record<string, string>>>
  >
}

const RANK: Readonly<Record<HealthStatus, number>> = { UP: 0, DEGRADED: 1, DOWN: 2 }

/**
 * The worst of the given statuses (`UP` for none).
 *
 * @example
 * ```ts
 * worstStatus(['UP', 'DEGRADED']) // 'DEGRADED'
 * ```
 */
export function worstStatus(statuses: Iterable<HealthStatus>): HealthStatus {
  let worst: HealthStatus = 'UP'
  for (const status of statuses) if (RANK[status] > RANK[worst]) worst = status
  return worst
}

/**
 * The HTTP status code for a health status: 503 only for `DOWN`, so an orchestrator never
 * restarts a process that is merely degraded or held back by a blocked broker.
 *
 * @example
 * ```ts
 * httpStatusOf('DEGRADED') // 200
 * ```
 */
export function httpStatusOf(status: HealthStatus): 200 | 503 {
  return status === 'DOWN' ? 503 : 200
}

/**
 * Renders a health result as the JSON every AceMQ endpoint serves:
 * `{"status":"UP","inFlight":0,"components":{"connection":{"status":"UP","open":"true",...}}}`.
 * `status` comes first, in the body and in each component (a detail called `status` never
 * replaces the component's), then the details in their order. Every detail value goes through
 * {@link redactCredentials}, and a detail named like a secret (`password`, `apiKey`,
 * `db_token`, ...) shows `***`: a contributor's error message may carry a connection URL.
 *
 * @example
 * ```ts
 * res.status(httpStatusOf(result.status)).json(toHealthJson(result))
 * ```
 */
export function toHealthJson(result: HealthResult): HealthJson {
  const components: Record<string, { status: HealthStatus } & Record<string, string>> = {}
  for (const report of result.reports) {
    const component: { status: HealthStatus } & Record<string, string> = { status: report.status }
    for (const [key, value] of Object.entries(report.details)) {
      if (key === 'status') continue
      own(component, key, isSecretName(key) ? REDACTED : redactCredentials(String(value)))
    }
    own(components, report.name, component)
  }
  return { status: result.status, inFlight: result.inFlight, components }
}

// A plain assignment of `__proto__` would set the prototype instead of adding the key.
function own(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  })
}

/** The body served when `health()` itself fails. */
export interface HealthErrorJson {
  readonly status: 'DOWN'
  readonly error: string
}

/** What a health endpoint answers, and the error behind a failed `health()` for its log. */
export interface HealthAnswer {
  readonly statusCode: 200 | 503
  readonly body: HealthJson | HealthErrorJson
  readonly error?: unknown
}

/**
 * Asks `source` for its health and renders what an HTTP endpoint answers: 503 only for
 * `DOWN`, the JSON of {@link toHealthJson}. Never rejects: a `health()` that throws becomes a
 * 503 `{"status":"DOWN","error":"..."}` with the message only (no stack, no password).
 *
 * @example
 * ```ts
 * const { statusCode, body } = await healthAnswer(mq)
 * res.writeHead(statusCode, { 'content-type': 'application/json' }).end(JSON.stringify(body))
 * ```
 */
export async function healthAnswer(source: HealthSource): Promise<HealthAnswer> {
  try {
    const result = await source.health()
    return { statusCode: httpStatusOf(result.status), body: toHealthJson(result) }
  } catch (error) {
    return {
      statusCode: 503,
      body: { status: 'DOWN', error: redactCredentials(messageOf(error)) },
      error,
    }
  }
}

function messageOf(error: unknown): string {
  try {
    if (error instanceof Error) return error.message || error.name || 'health() failed'
    return typeof error === 'string' && error !== '' ? error : 'health() failed'
  } catch {
    // An error whose message getter throws still gets an answer.
    return 'health() failed'
  }
}
