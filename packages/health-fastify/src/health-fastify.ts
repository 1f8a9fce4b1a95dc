import { ConfigurationError } from '@acemq/core'
import { healthAnswer, type HealthSource } from '@acemq/core/spi'
import type { FastifyPluginAsync } from 'fastify'
import fastifyPlugin from 'fastify-plugin'

/**
 * The path {@link acemqHealth} answers on unless told otherwise: `/acemq-health`.
 *
 * @example
 * ```ts
 * await app.inject({ url: DEFAULT_HEALTH_PATH })
 * ```
 */
export const DEFAULT_HEALTH_PATH = '/acemq-health'

/**
 * Options for the {@link acemqHealth} plugin.
 *
 * @example
 * ```ts
 * const options: AcemqHealthOptions = { mq, path: '/internal/acemq' }
 * await app.register(acemqHealth, options)
 * ```
 */
export interface AcemqHealthOptions {
  /** What to report on: an `AceMq`, or anything with a `health()` method. */
  readonly mq: HealthSource
  /** Where the endpoint answers (default `/acemq-health`). */
  readonly path?: string
}

const STATUS = { type: 'string', enum: ['UP', 'DEGRADED', 'DOWN'] } as const

// The response schema, so fastify serializes with a compiled serializer. Component details are
// strings; a failed `health()` answers `status` and `error` only.
const HEALTH_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['status'],
  properties: {
    status: STATUS,
    inFlight: { type: 'integer' },
    components: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        required: ['status'],
        properties: { status: STATUS },
        additionalProperties: { type: 'string' },
      },
    },
    error: { type: 'string' },
  },
} as const

const plugin: FastifyPluginAsync<AcemqHealthOptions> = async (fastify, options) => {
  const { mq, path } = validate(options)
  fastify.route({
    method: 'GET',
    url: path,
    // HEAD even when the server was built with `exposeHeadRoutes: false`: probes use it.
    exposeHeadRoute: true,
    schema: { response: { 200: HEALTH_RESPONSE_SCHEMA, 503: HEALTH_RESPONSE_SCHEMA } },
    handler: async (request, reply) => {
      const answer = await healthAnswer(mq)
      if (answer.error !== undefined) {
        request.log.error({ err: answer.error }, 'acemq health: mq.health() failed')
      }
      void reply
        .code(answer.statusCode)
        .header('cache-control', 'no-store')
        .type('application/json; charset=utf-8')
      return answer.body
    },
  })
}

/**
 * A Fastify plugin serving the AceMQ health endpoint: `GET` (and `HEAD`) on `path` (default
 * `/acemq-health`) answers with `mq.health()` as JSON — 503 only when it is `DOWN`, 200 for
 * `UP` and `DEGRADED` (a broker that blocks publishing is `UP`, with the reason). Wrapped with
 * `fastify-plugin`, so the route lands on the instance it is registered on. No broker round
 * trip; no credentials in the body.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify'
 * import { acemqHealth } from '@acemq/health-fastify'
 *
 * const app = Fastify()
 * await app.register(acemqHealth, { mq }) // GET /acemq-health
 * ```
 */
export const acemqHealth = fastifyPlugin(plugin, {
  fastify: '5.x',
  name: '@acemq/health-fastify',
})

function validate(options: AcemqHealthOptions): Required<AcemqHealthOptions> {
  const { mq, path = DEFAULT_HEALTH_PATH } = (options ?? {}) as Partial<AcemqHealthOptions>
  if (
    typeof mq !== 'object' ||
    mq === null ||
    typeof (mq as { health?: unknown }).health !== 'function'
  ) {
    throw new ConfigurationError(
      `register(acemqHealth, { mq }): options.mq must have a health() method, such as an AceMq; got ${describeValue(mq)}`,
    )
  }
  if (typeof path !== 'string' || !path.startsWith('/')) {
    throw new ConfigurationError(
      `register(acemqHealth, { path }): options.path must be a string starting with '/'; got ${describeValue(path)}`,
    )
  }
  return { mq, path }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (value === null || value === undefined) return String(value)
  if (typeof value === 'object') return Object.prototype.toString.call(value)
  return `${typeof value} ${String(value)}`
}
