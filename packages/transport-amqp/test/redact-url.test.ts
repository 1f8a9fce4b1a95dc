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

  it('leaves text that is not a URL alone', () => {
    expect(redactUrl('not a url')).toBe('not a url')
    expect(redactUrl('')).toBe('')
  })
})
