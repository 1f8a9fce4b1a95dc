import { AceMq, ConfigurationError, InMemoryTransport } from '@acemq/core'
import Fastify, { type FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import {
  expectHeadAnswers,
  getJson,
  healthEndpointContract,
  useInMemoryConnection,
} from '@acemq/testing'
import { acemqHealth, type AcemqHealthOptions } from '../src/index.js'
import { serve } from './serve.js'

healthEndpointContract('acemqHealth (Fastify plugin)', {
  serve: (source, options) =>
    serve(async (app) => {
      await app.register(acemqHealth, { mq: source, ...options })
    }),
})

const live = useInMemoryConnection()

async function start(
  setup: (app: FastifyInstance) => Promise<void> = async (app) => {
    await app.register(acemqHealth, { mq: live.mq })
  },
  options: Parameters<typeof serve>[1] = {},
): Promise<string> {
  live.server = await serve(setup, options)
  return live.server.url
}

describe('acemqHealth (Fastify plugin)', () => {
  it('answers HEAD with the status code and headers only, even with exposeHeadRoutes off', async () => {
    const url = await start(undefined, { exposeHeadRoutes: false })
    await expectHeadAnswers(`${url}/acemq-health`, live.mq)
  })

  it('leaves other routes and other methods on its path alone', async () => {
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq: live.mq })
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

  it('is not encapsulated: registered inside a plugin, it still serves at the path', async () => {
    const url = await start(async (app) => {
      await app.register(async (scope) => {
        await scope.register(acemqHealth, { mq: live.mq })
      })
    })
    expect((await fetch(`${url}/acemq-health`)).status).toBe(200)
    expect((acemqHealth as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')]).toBe(
      true,
    )
  })

  it('serves under a prefix when registered inside a prefixed plugin', async () => {
    const url = await start(async (app) => {
      await app.register(async (ops) => ops.register(acemqHealth, { mq: live.mq }), {
        prefix: '/ops',
      })
    })
    expect((await fetch(`${url}/ops/acemq-health`)).status).toBe(200)
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('can be registered twice, for two connections on two paths', async () => {
    const other = await AceMq.connect(new InMemoryTransport())
    await other.close()
    const url = await start(async (app) => {
      await app.register(acemqHealth, { mq: live.mq })
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
    await expect(register({ mq: live.mq, path: 'health' })).rejects.toThrow(
      /options\.path must be a string starting with '\/'; got "health"/,
    )
    await expect(register({ mq: live.mq, path: 42 })).rejects.toThrow(
      /options\.path .*got number 42/,
    )
  })
})
