import http from 'node:http'
import { ConfigurationError } from '@acemq/core'
import { type HealthSource } from '@acemq/core/spi'
import { describe, expect, it } from 'vitest'
import { getJson, healthEndpointContract, useInMemoryConnection } from '@acemq/testing'
import { acemqHealth, acemqHealthHandler } from '../src/index.js'
import { listen, serve } from './serve.js'

healthEndpointContract('acemqHealth (Express middleware)', {
  serve: (source, options) => serve((app) => app.use(acemqHealth(source, options))),
})

healthEndpointContract('acemqHealthHandler (a plain route)', {
  serve: (source, { path = '/acemq-health' } = {}) =>
    serve((app) => app.get(path, acemqHealthHandler(source))),
})

const live = useInMemoryConnection()

async function start(setup: Parameters<typeof serve>[0] = (app) => app.use(acemqHealth(live.mq))) {
  live.server = await serve(setup)
  return live.server.url
}

describe('acemqHealth (Express middleware)', () => {
  it('answers relative to where it is mounted, with a query string or a trailing slash', async () => {
    const url = await start((app) => app.use('/ops', acemqHealth(live.mq)))
    expect((await fetch(`${url}/ops/acemq-health?verbose=1`)).status).toBe(200)
    expect((await fetch(`${url}/ops/acemq-health/`)).status).toBe(200)
    expect((await fetch(`${url}/acemq-health`)).status).toBe(404)
  })

  it('leaves other routes and other methods on its path alone', async () => {
    const url = await start((app) => {
      app.use(acemqHealth(live.mq))
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

  it('refuses a missing mq or a path without a leading slash, naming the value', () => {
    expect(() => acemqHealth(undefined as unknown as HealthSource)).toThrow(ConfigurationError)
    expect(() => acemqHealth(undefined as unknown as HealthSource)).toThrow(
      /acemqHealth\(mq\).*undefined/,
    )
    expect(() => acemqHealth({} as HealthSource)).toThrow(/health\(\)/)
    expect(() => acemqHealth(live.mq, { path: 'health' })).toThrow(
      /acemqHealth\(options\.path\) must be a string starting with '\/'; got "health"/,
    )
  })
})

describe('acemqHealthHandler', () => {
  it('works with plain node:http, without Express', async () => {
    const handler = acemqHealthHandler(live.mq)
    live.server = await listen(
      http.createServer((req, res) => void handler(req, res)).listen(0, '127.0.0.1'),
    )
    const { status, body } = await getJson(`${live.server.url}/anything`)
    expect(status).toBe(200)
    expect(body.status).toBe('UP')
  })

  it('refuses a missing mq', () => {
    expect(() => acemqHealthHandler(null as unknown as HealthSource)).toThrow(
      /acemqHealthHandler\(mq\) needs something with a health\(\) method.*null/,
    )
  })
})
