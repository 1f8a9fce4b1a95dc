import type { AddressInfo } from 'node:net'
import express from 'express'
import Fastify from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { acemqConsole } from '../src/express.js'
import { acemqConsolePlugin } from '../src/fastify.js'
import { archiveWithHostileLetters } from './support/fixture.js'

const TOKEN = 'a-token-of-24-characters'
const bearer = { authorization: `Bearer ${TOKEN}` }

describe('the console mounted in a service', () => {
  let fixture: Awaited<ReturnType<typeof archiveWithHostileLetters>>

  beforeAll(async () => {
    fixture = await archiveWithHostileLetters()
  })

  afterAll(async () => {
    await fixture?.close()
  })

  /** Discards a letter through the mounted console, as a browser would. */
  async function discardThrough(base: string, id: string): Promise<Response> {
    const confirm = await (
      await fetch(`${base}/confirm?action=discard&ids=${id}`, { headers: bearer })
    ).text()
    expect(confirm).toContain(`action="${new URL(base).pathname}/actions/discard"`)
    const csrf = /name="_csrf" value="([^"]+)"/.exec(confirm)?.[1] as string
    return fetch(`${base}/actions/discard`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ids: id, _csrf: csrf }),
      redirect: 'manual',
    })
  }

  it('in Express, under its mount path, with the health page of the service', async () => {
    const app = express()
    app.use(
      '/ops/dead-letters',
      acemqConsole({ archive: fixture.archive, token: TOKEN, health: () => ({ status: 'UP' }) }),
    )
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ops/dead-letters`
      const list = await (await fetch(`${base}/messages`, { headers: bearer })).text()
      expect(list).toContain('href="/ops/dead-letters/messages/')
      expect(await (await fetch(`${base}/health`, { headers: bearer })).text()).toContain(
        '&quot;UP&quot;',
      )
      const done = await discardThrough(base, fixture.ids[0] as string)
      expect(done.status).toBe(303)
      expect(done.headers.get('location')).toBe(
        '/ops/dead-letters/messages?done=discarded&n=1&skipped=0',
      )
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('in Fastify, under its prefix', async () => {
    const app = Fastify()
    await app.register(acemqConsolePlugin, {
      prefix: '/console',
      archive: fixture.archive,
      token: TOKEN,
    })
    const address = await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const list = await (await fetch(`${address}/console/messages`, { headers: bearer })).text()
      expect(list).toContain('href="/console/messages/')
      const done = await discardThrough(`${address}/console`, fixture.ids[2] as string)
      expect(done.status).toBe(303)
      expect(done.headers.get('location')).toMatch(/^\/console\/messages\?done=discarded&n=1/)
    } finally {
      await app.close()
    }
  })
})
