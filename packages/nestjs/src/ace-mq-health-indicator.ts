import { toHealthJson, type HealthStatus } from '@acemq/core'
import { healthAnswer, redactCredentials } from '@acemq/core/spi'
import {
  Controller,
  Get,
  Header,
  HttpException,
  Inject,
  Injectable,
  type Type,
} from '@nestjs/common'
import { ModuleRef } from '@nestjs/core'
import type { AceMqConnection } from './ace-mq-connection.js'
import { DEFAULT_CONNECTION_NAME } from './module-options.js'
import { getAceMqToken } from './tokens.js'

/**
 * What {@link AceMqHealthIndicator.isHealthy} answers: a `@nestjs/terminus` indicator result,
 * `{ [key]: { status, ...components } }`.
 *
 * @example
 * ```ts
 * const result: AceMqIndicatorResult = await indicator.isHealthy('acemq')
 * ```
 */
export type AceMqIndicatorResult = Record<
  string,
  { readonly status: 'up' | 'degraded' | 'down'; readonly [detail: string]: unknown }
>

const TERMINUS_STATUS: Record<HealthStatus, 'up' | 'degraded' | 'down'> = {
  UP: 'up',
  DEGRADED: 'degraded',
  DOWN: 'down',
}

/**
 * A `@nestjs/terminus` health indicator for a connection: `UP` is `up`, `DEGRADED` is
 * `degraded` (terminus still answers 200) and `DOWN` is `down` (503), with the library's
 * components (`connection`, `consumers`, a store's) as details, credentials scrubbed. It never
 * throws, and never makes a broker round trip. Provided by `AceMqModule`; it imports nothing
 * from terminus, so an application without terminus loses nothing.
 *
 * @example
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.acemq.isHealthy('acemq')]) }
 * ```
 */
export class AceMqHealthIndicator {
  readonly #moduleRef: ModuleRef

  constructor(moduleRef: ModuleRef) {
    this.#moduleRef = moduleRef
  }

  /** The health of the connection named `connection` (default `'default'`) under `key`. */
  async isHealthy(
    key = 'acemq',
    connection: string = DEFAULT_CONNECTION_NAME,
  ): Promise<AceMqIndicatorResult> {
    try {
      const source = this.#moduleRef.get<AceMqConnection>(getAceMqToken(connection), {
        strict: false,
      })
      const json = toHealthJson(await source.health())
      return {
        [key]: {
          status: TERMINUS_STATUS[json.status],
          inFlight: json.inFlight,
          ...json.components,
        },
      }
    } catch (error) {
      return {
        [key]: {
          status: 'down',
          error: redactCredentials(error instanceof Error ? error.message : String(error)),
        },
      }
    }
  }
}

// Nest's decorators applied as calls: the package's source has no decorator syntax, so it runs
// under any TypeScript transform (tsx, vite, esbuild) without experimentalDecorators.
Injectable()(AceMqHealthIndicator)
Inject(ModuleRef)(AceMqHealthIndicator, undefined, 0)

/** @internal A controller serving a connection's health on `path`, for apps without terminus. */
export function healthController(path: string, connection: string): Type<unknown> {
  class AceMqHealthController {
    readonly #source: AceMqConnection

    constructor(source: AceMqConnection) {
      this.#source = source
    }

    async health(): Promise<unknown> {
      const answer = await healthAnswer(this.#source)
      // DOWN is 503 with the same body; Nest's exception layer writes an object response as is.
      if (answer.statusCode !== 200) throw new HttpException(answer.body, answer.statusCode)
      return answer.body
    }
  }
  Controller()(AceMqHealthController)
  Inject(getAceMqToken(connection))(AceMqHealthController, undefined, 0)
  const method = Object.getOwnPropertyDescriptor(AceMqHealthController.prototype, 'health')
  if (method !== undefined) {
    Get(path)(AceMqHealthController.prototype, 'health', method)
    Header('cache-control', 'no-store')(AceMqHealthController.prototype, 'health', method)
  }
  return AceMqHealthController
}
