import { headerInteger, headerString } from '../headers/header-values.js'
import type { Headers, TypedInteger } from '../transport/transport.js'

/**
 * The family's route headers, as the Java and .NET AceMQ libraries write them on a pipeline's
 * messages: the step names of the route, comma-joined; which of them the message is for,
 * 0-based; and the run's id, the same on every hop.
 *
 * @example
 * ```ts
 * message.wireHeaders[ROUTE_HEADERS.route] // 'reserve,charge,ship'
 * ```
 */
export const ROUTE_HEADERS = Object.freeze({
  route: 'x-acemq-route',
  position: 'x-acemq-route-position',
  runId: 'x-acemq-route-id',
} as const)

/** A route read from a message, or about to be written on one. */
export interface Route {
  /** The route's entries, in order: step names (or, leniently, step queue names). */
  readonly steps: readonly string[]
  /** Which entry the message is for, from 0. */
  readonly position: number
  /** The run's id; undefined when the message carried none. */
  readonly runId: string | undefined
}

/**
 * Reads the route headers leniently, as every AceMQ library may have written them: the route
 * as text or UTF-8 bytes, blank entries dropped and the rest trimmed; the position as an
 * integer of any width or a decimal string, 0 when missing, unreadable or negative (a
 * position that cannot be read says nothing, and the queue the message arrived on decides).
 * Undefined when there is no route, or it names no step.
 *
 * @example
 * ```ts
 * readRoute({ 'x-acemq-route': 'a,b', 'x-acemq-route-position': 1 }) // { steps: ['a', 'b'], position: 1, ... }
 * ```
 */
export function readRoute(headers: Headers | undefined): Route | undefined {
  if (headers === undefined) return undefined
  const text = headerString(headers[ROUTE_HEADERS.route])
  if (text === undefined) return undefined
  const steps = text
    .split(',')
    .map((step) => step.trim())
    .filter((step) => step !== '')
  if (steps.length === 0) return undefined
  const position = headerInteger(headers[ROUTE_HEADERS.position])
  return {
    steps,
    position: position === undefined || position < 0 ? 0 : position,
    runId: headerString(headers[ROUTE_HEADERS.runId]),
  }
}

/**
 * The route headers to publish: the route as text, the position as a signed 32-bit AMQP
 * `int` (the width the Java and .NET libraries write), the run id as text.
 *
 * @example
 * ```ts
 * routeHeaders({ steps: ['a', 'b'], position: 0, runId: 'run-1' })
 * ```
 */
export function routeHeaders(route: Route & { readonly runId: string }): Headers {
  const position: TypedInteger = { '!': 'int', value: route.position }
  return {
    [ROUTE_HEADERS.route]: route.steps.join(','),
    [ROUTE_HEADERS.position]: position,
    [ROUTE_HEADERS.runId]: route.runId,
  }
}
