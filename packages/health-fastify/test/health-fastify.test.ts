import {
  AceMq,
  ConfigurationError,
  InMemoryTransport,
  toHealthJson,
  type HealthSource,
} from '@acemq/core'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { acemqHealth, DEFAULT_HEALTH_PATH, type AcemqHealthOptions } from '../src/index.js'
import { getJson, serve, type Served } from './serve.js'

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

async function start(
  setup: (app: FastifyInstance) => Promise<void> = async (app) => {
    await app.register(acemqHealth, { mq })
  },
  options: Parameters<typeof serve>[1] = {},
): Promise<string> {
  server = await serve(setup, options)
  return server.url
}

describe('acemqHealth (Fastify plugin)', () => {
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

  it('answers HEAD with the status code and headers only, even with exposeHeadRoutes off', async () => {
    const url = await start(undefined, { exposeHeadRoutes: false })
    const response = await fetch(`${url}/acemq-health`, { method: 'HEAD' })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    expect(response.headers.get('cache-control')).toBe('no-store')
    expect(await response.text()).toBe('')
    await mq.close()
    expect((await fetch(`${url}/acemq-health`, { method: 'HEAD' })).status).toBe(503)
  })

  it('answers on a custom path, and the default path is then 404', async () => {
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq, path: '/internal/health' })
    })
    const custom = await getJson(`${url}/internal/health`)
    expect(custom.status).toBe(200)
    expect(custom.body.status).toBe('UP')
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('leaves other routes and other methods on its path alone', async () => {
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq })
      app.get('/orders', async () => ({ orders: [] }))
      app.post('/acemq-health', async (_request, reply) => reply.code(405).send('no'))
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
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq: failing })
    })
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

  it('is not encapsulated: registered inside a plugin, it still serves at the path', async () => {
    const url = await start(async (app) => {
      await app.register(async (scope) => {
        await scope.register(acemqHealth, { mq })
      })
    })
    expect((await fetch(`${url}/acemq-health`)).status).toBe(200)
    expect((acemqHealth as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')]).toBe(
      true,
    )
  })

  it('serves under a prefix when registered inside a prefixed plugin', async () => {
    const url = await start(async (app) => {
      await app.register(async (ops) => ops.register(acemqHealth, { mq }), { prefix: '/ops' })
    })
    expect((await fetch(`${url}/ops/acemq-health`)).status).toBe(200)
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('can be registered twice, for two connections on two paths', async () => {
    const other = await AceMq.connect(new InMemoryTransport())
    await other.close()
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq })
      await app.register(acemqHealth, { mq: other, path: '/other-health' })
    })
    expect((await fetch(`${url}/acemq-health`)).status).toBe(200)
    expect((await fetch(`${url}/other-health`)).status).toBe(503)
  })
})

describe('acemqHealth options', () => {
  async function register(options: unknown): Promise<void> {
    const app = Fastify()
    try {
      await app.register(acemqHealth, options as AcemqHealthOptions)
    } finally {
      await app.close().catch(() => undefined)
    }
  }

  it('refuses a missing mq, naming the option and the value', async () => {
    await expect(register({})).rejects.toThrow(ConfigurationError)
    await expect(register({})).rejects.toThrow(
      /options\.mq must have a health\(\) method.*got undefined/,
    )
    await expect(register({ mq: 'amqp://localhost' })).rejects.toThrow(
      /options\.mq .*got "amqp:\/\/localhost"/,
    )
  })

  it("refuses a path that does not start with '/', naming the value", async () => {
    await expect(register({ mq, path: 'health' })).rejects.toThrow(
      /options\.path must be a string starting with '\/'; got "health"/,
    )
    await expect(register({ mq, path: 42 })).rejects.toThrow(/options\.path .*got number 42/)
  })
})
