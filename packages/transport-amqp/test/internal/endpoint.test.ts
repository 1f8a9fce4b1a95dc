import { describe, expect, it } from 'vitest'
import { ConfigurationError } from '@acemq/core'
import { resolveEndpoint, resolveNodes } from '../../src/internal/endpoint.js'
import type { Endpoint, EndpointSettings } from '../../src/internal/endpoint.js'

const settings: EndpointSettings = {
  heartbeatSeconds: 10,
  heartbeatExplicit: false,
  connectionName: 'orders',
  connectTimeoutMs: 5_000,
  socketOptions: { keepAlive: true, clientProperties: { team: 'payments' } },
}

describe('resolveEndpoint', () => {
  it('describes a URL without its password and keeps the password among the secrets', () => {
    const endpoint = resolveEndpoint('amqp://app:s%2Fcret@rabbit:5672/orders', settings)
    expect(endpoint.description).toBe('amqp://app:***@rabbit:5672/orders')
    expect(endpoint.secrets).toEqual(expect.arrayContaining(['s%2Fcret', 's/cret']))
  })

  it('never shows a password holding ?, /, #, @ or %, raw or percent-encoded', () => {
    for (const password of ['pa?ss', 'pa/ss', 'pa#ss', 'p@ss', 'p%ss', '12?ss', '12/ss', '12#ss']) {
      for (const written of [password, encodeURIComponent(password)]) {
        const url = `amqp://app:${written}@rabbit:5672/orders`
        let shown: string
        try {
          const endpoint = resolveEndpoint(url, settings)
          shown = endpoint.description
          // Whatever the URL parser made of it, the password as written is among the secrets.
          expect(endpoint.secrets, written).toEqual(expect.arrayContaining([written]))
          expect(endpoint.secrets, written).toEqual(expect.arrayContaining([password]))
        } catch (error) {
          expect(error).toBeInstanceOf(ConfigurationError)
          shown = (error as Error).message
          expect(shown).toMatch(/percent-encode/)
        }
        expect(shown, written).toContain('amqp://app:***@rabbit:5672/orders')
        expect(shown, written).not.toContain(password)
        expect(shown, written).not.toContain(written)
      }
    }
  })

  it('describes a connection object the same way', () => {
    expect(
      resolveEndpoint(
        { protocol: 'amqps', hostname: 'rabbit', username: 'app', password: 'x', vhost: 'v/1' },
        settings,
      ).description,
    ).toBe('amqps://app:***@rabbit:5671/v%2F1')
    expect(resolveEndpoint({}, settings).description).toBe('amqp://localhost:5672')
  })

  it('names each connection for its role and passes socket options through', () => {
    const { socketOptions } = resolveEndpoint('amqp://rabbit', settings).connectArguments('publish')
    expect(socketOptions).toMatchObject({
      keepAlive: true,
      timeout: 5_000,
      clientProperties: { team: 'payments', connection_name: 'orders (publish)' },
    })
  })

  it('sets the heartbeat unless the URL has its own and the option was not given', () => {
    const fromDefault = resolveEndpoint('amqp://rabbit', settings).connectArguments('consume')
    expect(fromDefault.target).toBe('amqp://rabbit?heartbeat=10')
    const urlWins = resolveEndpoint('amqp://rabbit?heartbeat=30', settings)
    expect(urlWins.connectArguments('consume').target).toBe('amqp://rabbit?heartbeat=30')
    const optionWins = resolveEndpoint('amqp://rabbit?heartbeat=30', {
      ...settings,
      heartbeatExplicit: true,
    })
    expect(optionWins.connectArguments('consume').target).toBe('amqp://rabbit?heartbeat=10')
    const object = resolveEndpoint({ hostname: 'rabbit' }, settings).connectArguments('consume')
    expect(object.target).toMatchObject({ hostname: 'rabbit', heartbeat: 10 })
  })

  it('refuses what is not an AMQP URL, without showing the password', () => {
    expect(() => resolveEndpoint('http://app:s3cret@rabbit', settings)).toThrow(ConfigurationError)
    expect(() => resolveEndpoint('http://app:s3cret@rabbit', settings)).toThrow(
      "url must use the amqp:// or amqps:// scheme; got 'http://app:***@rabbit'",
    )
    expect(() => resolveEndpoint('rabbit:5672', settings)).toThrow(/amqp/)
    expect(() => resolveEndpoint({ protocol: 'http' }, settings)).toThrow(/url\.protocol/)
  })
})

describe('resolveNodes', () => {
  it('takes a list of nodes, each with its own address and secrets, shown without passwords', () => {
    const set = resolveNodes(
      ['amqp://app:one@rabbit-1:5672', { hostname: 'rabbit-2', username: 'app', password: 'two' }],
      settings,
    )
    expect(set.nodes.map((node) => node.address)).toEqual(['rabbit-1:5672', 'rabbit-2:5672'])
    expect(set.description).toBe(
      'one of amqp://app:***@rabbit-1:5672, amqp://app:***@rabbit-2:5672',
    )
    expect(set.secrets).toEqual(expect.arrayContaining(['one', 'two']))
    expect(set.nodes[1]?.connectArguments('publish').target).toMatchObject({ hostname: 'rabbit-2' })
    expect(resolveNodes(['amqp://rabbit-1'], settings).description).toBe('amqp://rabbit-1')
  })

  it('refuses TLS options for a node that is not amqps://, so they are never quietly ignored', () => {
    const tls = { ...settings, tls: { servername: 'rabbit.internal' } }
    expect(() => resolveNodes('amqp://rabbit', tls)).toThrow(/is not amqps:\/\//)
    expect(() => resolveNodes(['amqps://rabbit-1', 'amqp://rabbit-2'], tls)).toThrow(
      ConfigurationError,
    )
    expect(() =>
      resolveNodes('amqps://rabbit', { ...settings, tls: { sni: 'x' } as never }),
    ).toThrow(/tls has no field 'sni'/)
    expect(() =>
      resolveNodes('amqps://rabbit', { ...settings, tls: { externalAuth: true } }),
    ).toThrow(/give tls.cert and tls.key/)
  })

  it('verifies certificates even when NODE_TLS_REJECT_UNAUTHORIZED=0 is set, and passes the TLS material', () => {
    const before = process.env['NODE_TLS_REJECT_UNAUTHORIZED']
    process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = '0'
    try {
      const node = resolveNodes('amqps://rabbit:5671', {
        ...settings,
        tls: {
          ca: 'CA PEM',
          cert: 'CERT',
          key: 'KEY',
          servername: 'rabbit.internal',
          externalAuth: true,
        },
      }).nodes[0]
      const { socketOptions } = (node as Endpoint).connectArguments('consume')
      expect(socketOptions).toMatchObject({
        rejectUnauthorized: true,
        ca: 'CA PEM',
        cert: 'CERT',
        key: 'KEY',
        servername: 'rabbit.internal',
      })
      expect(socketOptions.credentials?.mechanism).toBe('EXTERNAL')
      expect(node?.mechanism).toBe('EXTERNAL')
      expect(resolveNodes('amqps://rabbit', settings).nodes[0]?.mechanism).toBe('PLAIN')
      const plain = resolveNodes('amqps://rabbit', settings).nodes[0]?.connectArguments('publish')
      expect(plain?.socketOptions).toMatchObject({ rejectUnauthorized: true })
      expect(plain?.socketOptions.credentials).toBeUndefined()
    } finally {
      if (before === undefined) delete process.env['NODE_TLS_REJECT_UNAUTHORIZED']
      else process.env['NODE_TLS_REJECT_UNAUTHORIZED'] = before
    }
  })
})
