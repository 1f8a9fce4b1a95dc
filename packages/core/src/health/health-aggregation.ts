import { ConfigurationError, describeError } from '../errors.js'
import {
  worstStatus,
  type HealthContributor,
  type HealthReport,
  type HealthResult,
  type HealthStatus,
} from './health.js'

/** How long a health contributor may take before it is reported DOWN. */
const HEALTH_CONTRIBUTOR_TIMEOUT_MS = 5_000

/** What the `connection` report reads of a connection (docs/design.md §9). */
export interface ConnectionHealth {
  readonly transport: {
    readonly kind: string
    readonly description: string
    readonly state: {
      readonly open: boolean
      readonly closed: boolean
      readonly blocked: boolean
      readonly blockedReason?: string | undefined
    }
  }
  readonly inFlight: number
  readonly held: number
  readonly consumingPaused: boolean
  readonly publishingPaused: boolean
  /** Whether the connection is closing or closed. */
  readonly closing: boolean
}

/** What the `consumers` report reads of one consumer. */
export interface ConsumerHealth {
  readonly waiting: number
  /** Messages an interceptor refused. */
  readonly refused: number
  /** What the consumer is struggling with, or undefined. */
  trouble():
    | {
        readonly queue: string
        readonly unsubscribed: boolean
        readonly failingMoves: readonly string[]
        readonly storeFailure: string | undefined
      }
    | undefined
}

/**
 * A connection's health: the `connection` report, the `consumers` report while any consumer
 * exists, and every contributor's, aggregated to the worst status (docs/design.md §9).
 */
export async function aggregateHealth(
  connection: ConnectionHealth,
  consumers: readonly ConsumerHealth[],
  contributors: HealthContributors,
): Promise<HealthResult> {
  const reports: HealthReport[] = [connectionReport(connection)]
  const consumersHealth = consumersReport(consumers)
  if (consumersHealth !== undefined) reports.push(consumersHealth)
  reports.push(...(await contributors.reports()))
  return {
    status: worstStatus(reports.map((r) => r.status)),
    inFlight: connection.inFlight,
    reports,
  }
}

/** The health contributors registered on a connection, by name. */
export class HealthContributors {
  readonly #contributors = new Map<string, HealthContributor>()

  /** Adds a contributor; returns a function that removes it. */
  register(contributor: HealthContributor): () => void {
    if (
      typeof contributor?.name !== 'string' ||
      contributor.name === '' ||
      typeof contributor.report !== 'function'
    ) {
      throw new ConfigurationError(
        'registerHealth(contributor) needs a non-empty name and a report() function',
      )
    }
    if (
      contributor.name === 'connection' ||
      contributor.name === 'consumers' ||
      this.#contributors.has(contributor.name)
    ) {
      throw new ConfigurationError(
        `registerHealth(contributor): the name '${contributor.name}' is taken`,
      )
    }
    this.#contributors.set(contributor.name, contributor)
    return () => {
      if (this.#contributors.get(contributor.name) === contributor)
        this.#contributors.delete(contributor.name)
    }
  }

  /** Every contributor's report; one that throws or takes longer than 5 s is `DOWN`. */
  reports(): Promise<HealthReport[]> {
    return Promise.all([...this.#contributors.values()].map((c) => reportOf(c)))
  }
}

/**
 * `connection`: `UP`, `UP` with the reason while the broker blocks publishing, `DEGRADED` while
 * the connection is being recovered, `DOWN` only once it is closing or closed.
 */
function connectionReport(connection: ConnectionHealth): HealthReport {
  const state = connection.transport.state
  const details: Record<string, string> = {
    open: String(state.open),
    blocked: String(state.blocked),
    transport: `${connection.transport.kind} ${connection.transport.description}`,
    inFlight: String(connection.inFlight),
    held: String(connection.held),
  }
  if (state.blocked && state.blockedReason !== undefined)
    details['blockedReason'] = state.blockedReason
  if (connection.consumingPaused) details['consuming'] = 'paused'
  if (connection.publishingPaused) details['publishing'] = 'paused'
  // DOWN only for a connection closed for good. One that dropped and is being recovered is
  // DEGRADED: restarting the process would not bring the broker back any sooner.
  let status: HealthStatus = 'UP'
  if (state.closed || connection.closing) status = 'DOWN'
  else if (!state.open) {
    status = 'DEGRADED'
    details['recovering'] = 'true'
  }
  return { name: 'connection', status, details }
}

/**
 * `consumers`, while any consumer exists: `DEGRADED` while one has lost its subscription,
 * cannot move a copy, or finds its idempotency store failing, with which and why.
 */
function consumersReport(consumers: readonly ConsumerHealth[]): HealthReport | undefined {
  if (consumers.length === 0) return undefined
  const unsubscribed: string[] = []
  const failingMoves: string[] = []
  const failingStore: string[] = []
  let storeError: string | undefined
  let waiting = 0
  let refused = 0
  for (const consumer of consumers) {
    waiting += consumer.waiting
    refused += consumer.refused
    const trouble = consumer.trouble()
    if (trouble === undefined) continue
    if (trouble.unsubscribed) unsubscribed.push(trouble.queue)
    for (const target of trouble.failingMoves) failingMoves.push(`${trouble.queue} -> ${target}`)
    if (trouble.storeFailure !== undefined) {
      failingStore.push(trouble.queue)
      storeError = trouble.storeFailure
    }
  }
  const details: Record<string, string> = {
    count: String(consumers.length),
    waiting: String(waiting),
  }
  // Counted, not a trouble: a refusal is the interceptor doing its work.
  if (refused > 0) details['refused'] = String(refused)
  if (unsubscribed.length > 0) details['unsubscribed'] = unsubscribed.join(',')
  if (failingMoves.length > 0) details['failingMoves'] = failingMoves.join(',')
  if (failingStore.length > 0) details['failingStore'] = failingStore.join(',')
  if (storeError !== undefined) details['storeError'] = storeError
  const degraded = unsubscribed.length + failingMoves.length + failingStore.length > 0
  return { name: 'consumers', status: degraded ? 'DEGRADED' : 'UP', details }
}

async function reportOf(contributor: HealthContributor): Promise<HealthReport> {
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no report within ${HEALTH_CONTRIBUTOR_TIMEOUT_MS} ms`)),
        HEALTH_CONTRIBUTOR_TIMEOUT_MS,
      )
      timer.unref?.()
    })
    const report = await Promise.race([Promise.resolve().then(() => contributor.report()), timeout])
    if (report?.status !== 'UP' && report?.status !== 'DEGRADED' && report?.status !== 'DOWN') {
      throw new Error(
        `report() returned no valid status (UP, DEGRADED or DOWN): ${JSON.stringify(report?.status)}`,
      )
    }
    const details: Record<string, string> = {}
    for (const [key, value] of Object.entries(report.details ?? {})) details[key] = String(value)
    return { name: contributor.name, status: report.status, details }
  } catch (error) {
    return { name: contributor.name, status: 'DOWN', details: { error: describeError(error) } }
  } finally {
    clearTimeout(timer)
  }
}
