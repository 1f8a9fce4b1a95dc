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

  it('finds none in text without a scheme, even with a colon and an @', () => {
    expect(passwordSpan('app:pw@rabbit')).toBeUndefined()
  })

  it('finds none when the user information has no colon and the host no port', () => {
    expect(passwordSpan('amqp://app@rabbit')).toBeUndefined()
  })

  it('finds the password of a URL with an empty scheme', () => {
    expect(passwordSpan('://app:pw@rabbit')).toEqual({ start: 7, end: 9 })
  })

  it('finds an empty password between the colon and the @', () => {
    expect(passwordSpan('amqp://app:@rabbit')).toEqual({ start: 11, end: 11 })
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

  it('hides a secret made of asterisks once, not again inside ***', () => {
    expect(redactSecrets('pass * here', ['*'])).toBe('pass *** here')
  })

  it('treats an empty user name as none', () => {
    expect(redactSecrets('amqp://app:*@mq', ['*'], '')).toBe('amqp://app:***@mq')
  })

  it('never hides the user name when the password is the user name', () => {
    expect(redactSecrets("amqp://guest:guest@rabbit 'guest'", ['guest'], 'guest')).toBe(
      "amqp://guest:***@rabbit 'guest'",
    )
  })

  it('hides the password inside user:password@ always', () => {
    expect(redactSecrets('amqp://ops:ops@rabbit, then ops:ops@', ['ops'], 'ops')).toBe(
      'amqp://ops:***@rabbit, then ops:***@',
    )
  })

  it('never hides the user name when the password is part of it', () => {
    expect(redactSecrets("set_permissions 'admin' (password min)", ['min'], 'admin')).toBe(
      "set_permissions 'admin' (password ***)",
    )
  })

  it('hides a password that holds the user name whole, and leaves the name', () => {
    expect(redactSecrets('login app / app123', ['app123'], 'app')).toBe('login app / ***')
  })

  it('hides a password apart from the user name wherever it appears', () => {
    expect(redactSecrets('user app, password s3cret, again s3cret', ['s3cret'], 'app')).toBe(
      'user app, password ***, again ***',
    )
  })

  it('hides the percent-encoded password next to the user name', () => {
    expect(redactSecrets('app p%40ss', ['p@ss'], 'app')).toBe('app ***')
  })
})

describe('redactCredentials', () => {
  it('hides URL passwords, secret-looking values and the known secrets in one pass', () => {
    expect(
      redactCredentials('amqp://app:s3cret@mq failed (password=hunter2, used s3cret)', ['s3cret']),
    ).toBe('amqp://app:***@mq failed (password=***, used ***)')
  })

  it('leaves text without credentials as it is', () => {
    expect(redactCredentials('Stryker was here')).toBe('Stryker was here')
  })

  it('hides the value of a secret JSON field', () => {
    expect(redactCredentials('{"token": "abc", "user": "app"}')).toBe(
      '{"token": "***", "user": "app"}',
    )
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
