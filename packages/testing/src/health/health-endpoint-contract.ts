import { AceMq, InMemoryTransport, toHealthJson } from '@acemq/core'
import { type HealthSource } from '@acemq/core/spi'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

/** A web server serving a health source through the adapter under test. */
export interface ServedHealth {
  readonly url: string
  close(): Promise<void>
}

/** How the contract mounts the adapter: at its default path, or at `path`. */
export interface HealthEndpointFixture {
  serve(source: HealthSource, options?: { readonly path?: string }): Promise<ServedHealth>
}

/** The endpoint's JSON, loosely typed for assertions. */
export interface HealthBody {
  status: string
  inFlight?: number
  error?: string
  components: Record<string, Record<string, string>>
}

/** The status, headers and parsed JSON body of `GET url`. */
export async function getJson(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> & HealthBody }> {
  const response = await fetch(url, init)
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: JSON.parse(text) }
}

/** A test's in-memory connection and the server it started, made fresh for each test and closed after it. */
export interface InMemoryConnection {
  transport: InMemoryTransport
  mq: AceMq
  server: ServedHealth | undefined
}

/** Registers the hooks that give each test of the enclosing suite an {@link InMemoryConnection}. */
export function useInMemoryConnection(): InMemoryConnection {
  const live = {} as InMemoryConnection
  beforeEach(async () => {
    live.transport = new InMemoryTransport()
    live.mq = await AceMq.connect(live.transport)
    live.server = undefined
  })
  afterEach(async () => {
    await live.server?.close()
    live.server = undefined
    await live.mq.close({ drainTimeout: 0 })
  })
  return live
}

/**
 * HEAD on `url` answers 200 with the JSON content type and `no-store` and no body while `mq`
 * is open, and 503 once it is closed (this closes it).
 */
export async function expectHeadAnswers(url: string, mq: AceMq): Promise<void> {
  const response = await fetch(url, { method: 'HEAD' })
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toMatch(/^application\/json/)
  expect(response.headers.get('cache-control')).toBe('no-store')
  expect(await response.text()).toBe('')
  await mq.close()
  expect((await fetch(url, { method: 'HEAD' })).status).toBe(503)
}

/**
 * What every health adapter (Express, Fastify, ...) must answer, mounted at its default
 * path on an in-memory connection: 503 only for DOWN, the JSON of `toHealthJson` with `status`
 * first and no credentials, HEAD, a custom path, and a health() that fails.
 */
export function healthEndpointContract(name: string, fixture: HealthEndpointFixture): void {
  describe(`${name}: the health endpoint contract`, () => {
    const live = useInMemoryConnection()

    async function start(
      source: HealthSource = live.mq,
      options: { readonly path?: string } = {},
    ): Promise<string> {
      live.server = await fixture.serve(source, options)
      return live.server.url
    }

    it('answers 200 UP with the connection details on GET /acemq-health', async () => {
      const url = await start()
      const { status, headers, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(200)
      expect(headers.get('content-type')).toMatch(/^application\/json/)
      expect(headers.get('cache-control')).toBe('no-store')
      expect(body).toEqual({
        status: 'UP',
        inFlight: 0,
        components: {
          connection: {
            status: 'UP',
            open: 'true',
            blocked: 'false',
            transport: 'in-memory this process',
            inFlight: '0',
            held: '0',
          },
        },
      })
    })

    it('serves exactly toHealthJson(mq.health())', async () => {
      live.mq.registerHealth({
        name: 'cache',
        report: () => ({ name: 'cache', status: 'UP', details: { size: '3' } }),
      })
      const url = await start()
      const { body } = await getJson(`${url}/acemq-health`)
      expect(body).toEqual(JSON.parse(JSON.stringify(toHealthJson(await live.mq.health()))))
    })

    it('answers 503 DOWN once the connection is closed', async () => {
      const url = await start()
      await live.mq.close()
      const { status, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(503)
      expect(body.status).toBe('DOWN')
      expect(body.components['connection']).toMatchObject({ status: 'DOWN', open: 'false' })
    })

    it('answers 200 DEGRADED when a contributor is degraded', async () => {
      live.mq.registerHealth({
        name: 'ordered:orders',
        report: () => ({ name: 'ordered:orders', status: 'DEGRADED', details: { halted: '1' } }),
      })
      const url = await start()
      const { status, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(200)
      expect(body.status).toBe('DEGRADED')
      expect(body.components['ordered:orders']).toEqual({ status: 'DEGRADED', halted: '1' })
    })

    it('answers 503 DOWN with the error when a contributor throws', async () => {
      live.mq.registerHealth({
        name: 'billing',
        report: () => {
          throw new Error('billing database unreachable')
        },
      })
      const url = await start()
      const { status, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(503)
      expect(body.status).toBe('DOWN')
      expect(body.components['billing']).toEqual({
        status: 'DOWN',
        error: 'billing database unreachable',
      })
      expect(body.components['connection']?.['status']).toBe('UP')
    })

    it('never shows a password a contributor puts in its error or its details', async () => {
      live.mq.registerHealth({
        name: 'orders-db',
        report: () => {
          throw new Error('connect ECONNREFUSED postgres://app:s3cret@db/x')
        },
      })
      live.mq.registerHealth({
        name: 'cache',
        report: () => ({
          name: 'cache',
          status: 'UP',
          details: {
            dsn: 'host=cache user=app password=hunter2 dbname=x',
            url: 'redis://default:t0ps3cret@cache:6379/0',
          },
        }),
      })
      const url = await start()
      const response = await fetch(`${url}/acemq-health`)
      const text = await response.text()
      expect(response.status).toBe(503)
      const body = JSON.parse(text) as HealthBody
      expect(body.components['orders-db']).toEqual({
        status: 'DOWN',
        error: 'connect ECONNREFUSED postgres://app:***@db/x',
      })
      expect(body.components['cache']).toEqual({
        status: 'UP',
        dsn: 'host=cache user=app password=*** dbname=x',
        url: 'redis://default:***@cache:6379/0',
      })
      for (const secret of ['s3cret', 'hunter2', 't0ps3cret']) expect(text).not.toContain(secret)
    })

    it('writes status first: in the body, in every component and when health() fails', async () => {
      live.mq.registerHealth({
        name: 'zeta',
        report: () => ({ name: 'zeta', status: 'DEGRADED', details: { b: '1', a: '2' } }),
      })
      live.mq.registerHealth({
        name: 'broken',
        report: () => {
          throw new Error('no')
        },
      })
      const url = await start()
      const text = await (await fetch(`${url}/acemq-health`)).text()
      const body = JSON.parse(text) as HealthBody
      expect(Object.keys(body)).toStrictEqual(['status', 'inFlight', 'components'])
      expect(Object.keys(body.components)).toStrictEqual(['connection', 'zeta', 'broken'])
      for (const component of Object.values(body.components)) {
        expect(Object.keys(component)[0]).toBe('status')
      }
      expect(Object.keys(body.components['zeta'] ?? {})).toStrictEqual(['status', 'b', 'a'])

      await live.server?.close()
      const failing = await start({ health: () => Promise.reject(new Error('down')) })
      const failed = JSON.parse(await (await fetch(`${failing}/acemq-health`)).text()) as object
      expect(Object.keys(failed)).toStrictEqual(['status', 'error'])
    })

    it('shows paused consuming and publishing', async () => {
      const url = await start()
      live.mq.pauseConsuming()
      live.mq.pausePublishing()
      const paused = await getJson(`${url}/acemq-health`)
      expect(paused.status).toBe(200)
      expect(paused.body.components['connection']).toMatchObject({
        consuming: 'paused',
        publishing: 'paused',
      })
      live.mq.resumeConsuming()
      live.mq.resumePublishing()
      const resumed = await getJson(`${url}/acemq-health`)
      expect(resumed.body.components['connection']).not.toHaveProperty('consuming')
      expect(resumed.body.components['connection']).not.toHaveProperty('publishing')
    })

    it('answers 200 UP with the reason while the broker blocks publishing', async () => {
      const url = await start()
      live.transport.block('low on memory')
      const { status, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(200)
      expect(body.status).toBe('UP')
      expect(body.components['connection']).toMatchObject({
        status: 'UP',
        blocked: 'true',
        blockedReason: 'low on memory',
      })
      live.transport.unblock()
      const after = await getJson(`${url}/acemq-health`)
      expect(after.body.components['connection']).toMatchObject({ blocked: 'false' })
      expect(after.body.components['connection']).not.toHaveProperty('blockedReason')
    })

    it('answers HEAD with the status code and headers only', async () => {
      await expectHeadAnswers(`${await start()}/acemq-health`, live.mq)
    })

    it('answers on a custom path, and the default path is then 404', async () => {
      const url = await start(live.mq, { path: '/internal/health' })
      const custom = await getJson(`${url}/internal/health`)
      expect(custom.status).toBe(200)
      expect(custom.body.status).toBe('UP')
      expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
    })

    it('answers 503 DOWN with the message, no stack and no password, when health() throws', async () => {
      const failing: HealthSource = {
        health: () =>
          Promise.reject(new Error('cannot reach amqp://app:s3cret@rabbit:5672/orders')),
      }
      const url = await start(failing)
      const response = await fetch(`${url}/acemq-health`)
      const text = await response.text()
      expect(response.status).toBe(503)
      expect(response.headers.get('cache-control')).toBe('no-store')
      expect(JSON.parse(text)).toEqual({
        status: 'DOWN',
        error: 'cannot reach amqp://app:***@rabbit:5672/orders',
      })
      expect(text).not.toContain('s3cret')
      expect(text).not.toContain('    at ')
    })

    it('answers 503 DOWN when health() throws something that is not an Error', async () => {
      const failing: HealthSource = {
        health: () => {
          throw 'broken'
        },
      }
      const url = await start(failing)
      const { status, body } = await getJson(`${url}/acemq-health`)
      expect(status).toBe(503)
      expect(body).toEqual({ status: 'DOWN', error: 'broken' })
    })
  })
}
