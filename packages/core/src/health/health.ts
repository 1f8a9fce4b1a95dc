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
 *
 * @example
 * ```ts
 * res.status(httpStatusOf(result.status)).json(toHealthJson(result))
 * ```
 */
export function toHealthJson(result: HealthResult): HealthJson {
  const components: Record<string, { status: HealthStatus } & Record<string, string>> = {}
  for (const report of result.reports) {
    components[report.name] = { ...report.details, status: report.status }
  }
  return { status: result.status, inFlight: result.inFlight, components }
}
