import { describe, expect, it } from 'vitest'
import { ConfigurationError, PublishFailedError } from '@acemq/core'
import {
  AmqpTransport,
  DEFAULT_CONNECT_TIMEOUT,
  DEFAULT_HEARTBEAT,
  DEFAULT_RECOVERY_INITIAL_DELAY,
  DEFAULT_RECOVERY_MAX_DELAY,
} from '../src/index.js'

describe('AmqpTransport (without a broker)', () => {
  it('has named defaults', () => {
    expect(DEFAULT_HEARTBEAT).toBe(10_000)
    expect(DEFAULT_CONNECT_TIMEOUT).toBe(10_000)
    expect(DEFAULT_RECOVERY_INITIAL_DELAY).toBe(500)
    expect(DEFAULT_RECOVERY_MAX_DELAY).toBe(30_000)
  })

  it('validates its options where they are given, naming the option', () => {
    const url = 'amqp://rabbit'
    expect(() => new AmqpTransport(url, { maxUnconfirmed: 0 })).toThrow(
      'maxUnconfirmed must be a positive integer; got 0',
    )
    expect(() => new AmqpTransport(url, { heartbeat: -1 })).toThrow(/heartbeat/)
    expect(() => new AmqpTransport(url, { connectTimeout: 0 })).toThrow(/connectTimeout/)
    expect(
      () => new AmqpTransport(url, { recovery: { initialDelay: '5s', maxDelay: '1s' } }),
    ).toThrow(/recovery\.maxDelay/)
    expect(() => new AmqpTransport(url, { connectionName: '' })).toThrow(ConfigurationError)
  })

  it('refuses a connect target it cannot use, instead of quietly connecting to localhost', () => {
    const refused: [unknown, RegExp][] = [
      [[], /at least one/],
      [['amqp://rabbit-1', 42], /url\[1\]/],
      [{ host: 'rabbit' }, /'host'.*hostname/],
      [{ hostname: 5672 }, /hostname must be a non-empty string/],
      ['amqp://', /no host/],
      ['amqp:rabbit', /no host/],
      [['amqp://rabbit-1', 'amqps://rabbit-2'], /amqps/],
      [['amqp://rabbit-1:5672', 'amqp://rabbit-1:5672'], /twice/],
      [null, /got null/],
    ]
    for (const [target, message] of refused) {
      let error: unknown
      try {
        new AmqpTransport(target as never)
      } catch (caught) {
        error = caught
      }
      expect(error, JSON.stringify(target)).toBeInstanceOf(ConfigurationError)
      expect((error as Error).message, JSON.stringify(target)).toMatch(message)
    }
  })

  it('starts closed-to-traffic and unconnected, and closes without ever connecting', async () => {
    const transport = new AmqpTransport('amqp://app:s3cret@rabbit')
    expect(transport.state).toEqual({
      open: false,
      closed: false,
      blocked: false,
      blockedReason: undefined,
    })
    await expect(
      transport.publish({
        exchange: '',
        routingKey: 'q',
        body: new Uint8Array(),
        headers: {},
        properties: {},
        persistent: true,
        mandatory: true,
      }),
    ).rejects.toThrow(PublishFailedError)
    const events: string[] = []
    transport.onEvent((event) => events.push(event.type))
    await transport[Symbol.asyncDispose]()
    await transport.close()
    expect(events).toEqual(['closed'])
    expect(transport.state.closed).toBe(true)
    await expect(transport.connect()).rejects.toThrow(/is closed/)
  })
})
