import { describe, expect, it } from 'vitest'
import { redactUrl } from '../src/index.js'

describe('redactUrl', () => {
  it('replaces the password and keeps everything else', () => {
    expect(redactUrl('amqp://app:s3cret@rabbit:5672/orders?heartbeat=10')).toBe(
      'amqp://app:***@rabbit:5672/orders?heartbeat=10',
    )
    expect(redactUrl('amqps://app:p%40ss@[::1]:5671/%2F')).toBe('amqps://app:***@[::1]:5671/%2F')
  })

  it('leaves a URL without a password alone', () => {
    expect(redactUrl('amqp://rabbit')).toBe('amqp://rabbit')
    expect(redactUrl('amqp://app@rabbit:5672')).toBe('amqp://app@rabbit:5672')
    expect(redactUrl('amqp://rabbit:5672/vhost')).toBe('amqp://rabbit:5672/vhost')
  })

  it('hides more rather than less when the password is not escaped', () => {
    const shown = redactUrl('amqp://app:pa/ss@w@rd@rabbit:5672/orders')
    expect(shown).toBe('amqp://app:***@rabbit:5672/orders')
    expect(redactUrl('amqp://app:se:cret@rabbit')).toBe('amqp://app:***@rabbit')
  })

  it('hides a password holding an unescaped ?, /, #, @ or % (the query and fragment may start inside it)', () => {
    for (const password of ['pa?ss', 'pa/ss', 'pa#ss', 'p@ss', '100%', 'a?b/c#d@e%f', 'x?y=1&z']) {
      const url = `amqp://app:${password}@rabbit:5672/orders?heartbeat=5`
      const shown = redactUrl(url)
      expect(shown, password).toBe('amqp://app:***@rabbit:5672/orders?heartbeat=5')
    }
    expect(redactUrl('amqps://app:pa?ss@rabbit')).toBe('amqps://app:***@rabbit')
    expect(redactUrl('amqp://app:pa#ss@rabbit/v#frag')).toBe('amqp://app:***@rabbit/v#frag')
  })

  it('hides a percent-encoded password', () => {
    for (const password of ['pa%3Fss', 'pa%2Fss', 'pa%23ss', 'p%40ss', '100%25']) {
      expect(redactUrl(`amqp://app:${password}@rabbit/orders`), password).toBe(
        'amqp://app:***@rabbit/orders',
      )
    }
  })

  it('leaves text that is not a URL alone', () => {
    expect(redactUrl('not a url')).toBe('not a url')
    expect(redactUrl('')).toBe('')
  })
})

describe('the redaction the transport uses', () => {
  it('is core’s, the one every package uses', async () => {
    const spi = await import('@acemq/core/spi')
    expect(redactUrl).toBe(spi.redactUrl)
  })
})
