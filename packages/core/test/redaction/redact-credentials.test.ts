import { describe, expect, it } from 'vitest'
import {
  isSecretName,
  passwordForms,
  passwordSpan,
  redactCredentials,
  redactSecrets,
  redactUrl,
} from '../../src/spi.js'

describe('passwordSpan', () => {
  it('finds the password from the first colon of the user information to the last @', () => {
    const url = 'amqp://app:pa@ss@rabbit/v'
    const span = passwordSpan(url)
    expect(span && url.slice(span.start, span.end)).toBe('pa@ss')
  })

  it('finds none without a scheme, an @ or a colon before it', () => {
    expect(passwordSpan('rabbit:5672')).toBeUndefined()
    expect(passwordSpan('amqp://rabbit:5672')).toBeUndefined()
    expect(passwordSpan('amqp://app@rabbit:5672')).toBeUndefined()
    expect(passwordSpan('user:pw@amqp://host')).toBeUndefined()
  })
})

describe('redactUrl', () => {
  it('hides the password and nothing else', () => {
    expect(redactUrl('amqps://app:s3cret@[::1]:5671/%2F?heartbeat=5')).toBe(
      'amqps://app:***@[::1]:5671/%2F?heartbeat=5',
    )
    expect(redactUrl('amqp://rabbit/v')).toBe('amqp://rabbit/v')
  })
})

describe('passwordForms', () => {
  it('gives the password as written, decoded and encoded, longest first', () => {
    expect(passwordForms('amqp://app:p%40ss@rabbit')).toEqual(['p%2540ss', 'p%40ss', 'p@ss'])
  })

  it('keeps a password that is not valid percent-encoding as written', () => {
    expect(passwordForms('amqp://app:100%@rabbit')).toEqual(['100%25', '100%'])
  })

  it('gives nothing for a URL without a password, or an empty one', () => {
    expect(passwordForms('amqp://rabbit')).toEqual([])
    expect(passwordForms('amqp://app:@rabbit')).toEqual([])
  })
})

describe('redactSecrets', () => {
  it('hides each known secret, as given and percent-encoded, and nothing else', () => {
    expect(redactSecrets('login p@ss / p%40ss; token=abc', ['p@ss'])).toBe(
      'login *** / ***; token=abc',
    )
    expect(redactSecrets('nothing to hide', [''])).toBe('nothing to hide')
  })
})

describe('redactCredentials', () => {
  it('hides URL passwords, secret-looking values and the known secrets in one pass', () => {
    expect(
      redactCredentials('amqp://app:s3cret@mq failed (password=hunter2, used s3cret)', ['s3cret']),
    ).toBe('amqp://app:***@mq failed (password=***, used ***)')
  })
})

describe('isSecretName', () => {
  it.each(['password', 'DB_PASSWORD', 'Pwd', 'apiKey', 'api-key', 'access_token', 'secret'])(
    'names %s a secret',
    (key) => expect(isSecretName(key)).toBe(true),
  )

  it.each(['user', 'host', 'blockedReason', 'inFlight'])('does not name %s a secret', (key) =>
    expect(isSecretName(key)).toBe(false),
  )
})
