import http from 'node:http'
import {
  AceMq,
  ConfigurationError,
  InMemoryTransport,
  toHealthJson,
  type HealthSource,
} from '@acemq/core'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { acemqHealth, acemqHealthHandler, DEFAULT_HEALTH_PATH } from '../src/index.js'
import { getJson, listen, serve, type Served } from './serve.js'

let transport: InMemoryTransport
let mq: AceMq
let server: Served | undefined

beforeEach(async () => {
  transport = new InMemoryTransport()
  mq = await AceMq.connect(transport)
})

afterEach(async () => {
  await server?.close()
  server = undefined
  await mq.close({ drainTimeout: 0 })
})

async function start(setup: Parameters<typeof serve>[0] = (app) => app.use(acemqHealth(mq))) {
  server = await serve(setup)
  return server.url
}

describe('acemqHealth (Express middleware)', () => {
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
    mq.registerHealth({
      name: 'cache',
      report: () => ({ name: 'cache', status: 'UP', details: { size: '3' } }),
    })
    const url = await start()
    const { body } = await getJson(`${url}${DEFAULT_HEALTH_PATH}`)
    expect(body).toEqual(JSON.parse(JSON.stringify(toHealthJson(await mq.health()))))
  })

  it('answers 503 DOWN once the connection is closed', async () => {
    const url = await start()
    await mq.close()
    const { status, body } = await getJson(`${url}/acemq-health`)
    expect(status).toBe(503)
    expect(body.status).toBe('DOWN')
    expect(body.components['connection']).toMatchObject({ status: 'DOWN', open: 'false' })
  })

  it('answers 200 DEGRADED when a contributor is degraded', async () => {
    mq.registerHealth({
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
    mq.registerHealth({
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

  it('shows paused consuming and publishing', async () => {
    const url = await start()
    mq.pauseConsuming()
    mq.pausePublishing()
    const paused = await getJson(`${url}/acemq-health`)
    expect(paused.status).toBe(200)
    expect(paused.body.components['connection']).toMatchObject({
      consuming: 'paused',
      publishing: 'paused',
    })
    mq.resumeConsuming()
    mq.resumePublishing()
    const resumed = await getJson(`${url}/acemq-health`)
    expect(resumed.body.components['connection']).not.toHaveProperty('consuming')
    expect(resumed.body.components['connection']).not.toHaveProperty('publishing')
  })

  it('answers 200 UP with the reason while the broker blocks publishing', async () => {
    const url = await start()
    transport.block('low on memory')
    const { status, body } = await getJson(`${url}/acemq-health`)
    expect(status).toBe(200)
    expect(body.status).toBe('UP')
    expect(body.components['connection']).toMatchObject({
      status: 'UP',
      blocked: 'true',
      blockedReason: 'low on memory',
    })
    transport.unblock()
    const after = await getJson(`${url}/acemq-health`)
    expect(after.body.components['connection']).toMatchObject({ blocked: 'false' })
    expect(after.body.components['connection']).not.toHaveProperty('blockedReason')
  })

  it('answers HEAD with the status code and headers only', async () => {
    const url = await start()
    const response = await fetch(`${url}/acemq-health`, { method: 'HEAD' })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await response.text()).toBe('')
    await mq.close()
    expect((await fetch(`${url}/acemq-health`, { method: 'HEAD' })).status).toBe(503)
  })

  it('answers on a custom path, and the default path is then 404', async () => {
    const url = await start((app) => app.use(acemqHealth(mq, { path: '/internal/health' })))
    const custom = await getJson(`${url}/internal/health`)
    expect(custom.status).toBe(200)
    expect(custom.body.status).toBe('UP')
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('answers relative to where it is mounted, with a query string or a trailing slash', async () => {
    const url = await start((app) => app.use('/ops', acemqHealth(mq)))
    expect((await fetch(`${url}/ops/acemq-health?verbose=1`)).status).toBe(200)
    expect((await fetch(`${url}/ops/acemq-health/`)).status).toBe(200)
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('leaves other routes and other methods on its path alone', async () => {
    const url = await start((app) => {
      app.use(acemqHealth(mq))
      app.get('/orders', (_req, res) => {
        res.json({ orders: [] })
      })
      app.post('/acemq-health', (_req, res) => {
        res.status(405).send('no')
      })
    })
    const orders = await getJson(`${url}/orders`)
    expect(orders.status).toBe(200)
    expect(orders.body).toEqual({ orders: [] })
    const post = await fetch(`${url}/acemq-health`, { method: 'POST' })
    expect(post.status).toBe(405)
    expect(await post.text()).toBe('no')
    expect((await fetch(`${url}/acemq-health-more`)).status).toBe(404)
  })

  it('answers 503 DOWN with the message, no stack and no password, when health() throws', async () => {
    const failing: HealthSource = {
      health: () => Promise.reject(new Error('cannot reach amqp://app:s3cret@rabbit:5672/orders')),
    }
    const url = await start((app) => app.use(acemqHealth(failing)))
    const response = await fetch(`${url}/acemq-health`)
    const text = await response.text()
    expect(response.status).toBe(503)
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
    const url = await start((app) => app.use(acemqHealth(failing)))
    const { status, body } = await getJson(`${url}/acemq-health`)
    expect(status).toBe(503)
    expect(body).toEqual({ status: 'DOWN', error: 'broken' })
  })

  it('refuses a missing mq or a path without a leading slash, naming the value', () => {
    expect(() => acemqHealth(undefined as unknown as HealthSource)).toThrow(ConfigurationError)
    expect(() => acemqHealth(undefined as unknown as HealthSource)).toThrow(
      /acemqHealth\(mq\).*undefined/,
    )
    expect(() => acemqHealth({} as HealthSource)).toThrow(/health\(\)/)
    expect(() => acemqHealth(mq, { path: 'health' })).toThrow(
      /acemqHealth\(options\.path\) must be a string starting with '\/'; got "health"/,
    )
  })
})

describe('acemqHealthHandler', () => {
  it('answers on the route it is given, for GET and HEAD', async () => {
    const url = await start((app) => app.get('/healthz', acemqHealthHandler(mq)))
    const { status, body, headers } = await getJson(`${url}/healthz`)
    expect(status).toBe(200)
    expect(body.components['connection']).toMatchObject({ status: 'UP', open: 'true' })
    expect(headers.get('cache-control')).toBe('no-store')
    expect((await fetch(`${url}/healthz`, { method: 'HEAD' })).status).toBe(200)
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('answers 503 DOWN through the handler too once the connection is closed', async () => {
    const url = await start((app) => app.get('/healthz', acemqHealthHandler(mq)))
    await mq.close()
    const { status, body } = await getJson(`${url}/healthz`)
    expect(status).toBe(503)
    expect(body.status).toBe('DOWN')
  })

  it('works with plain node:http, without Express', async () => {
    const handler = acemqHealthHandler(mq)
    server = await listen(
      http.createServer((req, res) => void handler(req, res)).listen(0, '127.0.0.1'),
    )
    const { status, body } = await getJson(`${server.url}/anything`)
    expect(status).toBe(200)
    expect(body.status).toBe('UP')
  })

  it('refuses a missing mq', () => {
    expect(() => acemqHealthHandler(null as unknown as HealthSource)).toThrow(
      /acemqHealthHandler\(mq\) needs something with a health\(\) method.*null/,
    )
  })
})
