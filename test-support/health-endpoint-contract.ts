import {
  AceMq,
  ConnectionBlockedError,
  InMemoryTransport,
  toHealthJson,
  type HealthSource,
} from '@acemq/core'
import { AmqpTransport } from '@acemq/transport-amqp'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { clearMemoryAlarm, raiseMemoryAlarm, withBrokerFault } from './broker-faults.js'
import { AMQP_URL, uniqueName } from './services.js'

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

/** A connection to the test broker served through `fixture` for each test of the suite. */
function servedOnRabbit(fixture: HealthEndpointFixture): { mq: AceMq; server: ServedHealth } {
  const live = {} as { mq: AceMq; server: ServedHealth }
  beforeEach(async () => {
    live.mq = await AceMq.connect(new AmqpTransport(AMQP_URL))
    live.server = await fixture.serve(live.mq)
  })
  afterEach(async () => {
    await live.server.close()
    await live.mq.close({ drainTimeout: 0 })
  })
  return live
}

/** The contract on a real connection: `available` is `await requireRabbit()`. */
export function healthEndpointOnRabbit(
  name: string,
  fixture: HealthEndpointFixture,
  available: boolean,
): void {
  describe.runIf(available)(`${name} on RabbitMQ`, () => {
    const live = servedOnRabbit(fixture)

    it('answers 200 UP for a live connection', async () => {
      const { status, body } = await getJson(`${live.server.url}/acemq-health`)
      expect(status).toBe(200)
      expect(body.status).toBe('UP')
      expect(body.components['connection']).toMatchObject({
        status: 'UP',
        open: 'true',
        blocked: 'false',
        inFlight: '0',
        held: '0',
      })
      expect(body.components['connection']?.['transport']).toMatch(/^amqp /)
      expect(body.components['connection']).not.toHaveProperty('blockedReason')
    })

    it('answers 503 DOWN once the connection is closed', async () => {
      await live.mq.close()
      const { status, body } = await getJson(`${live.server.url}/acemq-health`)
      expect(status).toBe(503)
      expect(body.status).toBe('DOWN')
      expect(body.components['connection']).toMatchObject({ status: 'DOWN', open: 'false' })
    })

    it('never shows the password of the broker URL', async () => {
      const { username, password } = new URL(AMQP_URL)
      const text = await (await fetch(`${live.server.url}/acemq-health`)).text()
      expect(text).toContain('127.0.0.1')
      expect(text).toContain('***')
      expect(text).not.toContain(`${username}:${password}`)
      expect(text).not.toContain(`:${password}@`)
      if (password !== username) expect(text).not.toContain(password)
    })
  })
}

/**
 * Polls `url` until `ready(body)` holds, calling `meanwhile()` after every answer that is not
 * ready yet; fails with the last answer after `timeoutMs`.
 */
async function waitForHealth(
  url: string,
  ready: (body: HealthBody) => boolean,
  meanwhile: () => void = () => undefined,
  timeoutMs = 20_000,
): Promise<{ status: number; body: HealthBody }> {
  const deadline = Date.now() + timeoutMs
  let last: { status: number; body: HealthBody } | undefined
  while (Date.now() < deadline) {
    last = await getJson(url)
    if (ready(last.body)) return last
    meanwhile()
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`the endpoint never got there; it last said ${JSON.stringify(last)}`)
}

const isBlocked = (body: HealthBody): boolean =>
  body.components['connection']?.['blocked'] === 'true'
const isUnblocked = (body: HealthBody): boolean =>
  body.components['connection']?.['blocked'] === 'false'

/**
 * The endpoint while RabbitMQ's memory alarm blocks publishing: for a `*.disruptive.test.ts`
 * file (it raises the broker-wide alarm inside `withBrokerFault`).
 */
export function healthEndpointUnderMemoryAlarm(
  name: string,
  fixture: HealthEndpointFixture,
  available: boolean,
): void {
  describe.runIf(available)(`${name} while RabbitMQ raises its memory alarm`, () => {
    const live = servedOnRabbit(fixture)

    it('answers 200 UP with blocked "true" and the broker\'s reason, and clears after', async () => {
      const url = `${live.server.url}/acemq-health`
      const nowhere = live.mq.publisher('', uniqueName('acemq.health.nowhere'), {
        allowUnroutable: true,
      })
      // Publishes the broker holds back settle once the alarm clears: confirmed, or refused at
      // once when the connection was already known to be blocked.
      const sends: Promise<unknown>[] = []
      const nudge = (): void => {
        sends.push(nowhere.send({ nudge: sends.length }).catch((error: unknown) => error))
      }

      await withBrokerFault(async () => {
        try {
          await raiseMemoryAlarm()
          // On an alarm RabbitMQ marks connections "blocking", and blocks one (sending
          // connection.blocked) only when it next publishes: publish until it does.
          const blocked = await waitForHealth(url, isBlocked, nudge)
          expect(blocked.status).toBe(200)
          expect(blocked.body.status).toBe('UP')
          expect(blocked.body.components['connection']).toMatchObject({
            status: 'UP',
            open: 'true',
            blocked: 'true',
            blockedReason: 'low on memory',
          })
          await expect(nowhere.send({ while: 'blocked' })).rejects.toBeInstanceOf(
            ConnectionBlockedError,
          )
        } finally {
          await clearMemoryAlarm()
        }
        const cleared = await waitForHealth(url, isUnblocked)
        expect(cleared.status).toBe(200)
        expect(cleared.body.status).toBe('UP')
        expect(cleared.body.components['connection']).not.toHaveProperty('blockedReason')
      })

      for (const result of await Promise.all(sends)) {
        if (result !== undefined) expect(result).toBeInstanceOf(ConnectionBlockedError)
      }
      await nowhere.send({ after: 'alarm' })
    })
  })
}
