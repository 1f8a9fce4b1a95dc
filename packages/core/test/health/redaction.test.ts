import { describe, expect, it } from 'vitest'
import { toHealthJson, type HealthResult } from '../../src/index.js'
import { healthAnswer, redactCredentials } from '../../src/spi.js'

describe('redactCredentials', () => {
  it.each([
    [
      'connect ECONNREFUSED postgres://app:s3cret@db/x',
      'connect ECONNREFUSED postgres://app:***@db/x',
    ],
    ['cannot reach amqp://app:s3cret@mq:5672', 'cannot reach amqp://app:***@mq:5672'],
    [
      'amqps://guest:guest@a and redis://:t0ken@b:6379',
      'amqps://guest:***@a and redis://:***@b:6379',
    ],
    // A password with an unescaped '@': everything up to the last '@' of the authority goes.
    ['mysql://root:p@ss@db:3306/app', 'mysql://root:***@db:3306/app'],
    // Unescaped '/', '?' or '#' in a password: it is hidden up to the last '@' all the same.
    ['cannot reach amqp://app:pa?ss@rabbit:5672/v', 'cannot reach amqp://app:***@rabbit:5672/v'],
    ['cannot reach amqp://app:pa#ss@rabbit', 'cannot reach amqp://app:***@rabbit'],
    ['cannot reach amqp://app:pa/ss@w@rd@rabbit/v', 'cannot reach amqp://app:***@rabbit/v'],
  ])('hides the password of a URL: %s', (text, expected) => {
    expect(redactCredentials(text)).toBe(expected)
  })

  it.each([
    ['host=db user=app password=hunter2 dbname=x', 'host=db user=app password=*** dbname=x'],
    ["host=db password='two words' dbname=x", 'host=db password=*** dbname=x'],
    ['Server=db;Pwd=hunter2;Database=x', 'Server=db;Pwd=***;Database=x'],
    ['https://api/x?user=a&api_key=abc123&n=1', 'https://api/x?user=a&api_key=***&n=1'],
    ['DB_PASSWORD = hunter2, next', 'DB_PASSWORD = ***, next'],
    ['access token=abc.def.ghi', 'access token=***'],
    ['"password":"hunter2"', '"password":"***"'],
  ])('hides the value of a secret-looking key: %s', (text, expected) => {
    expect(redactCredentials(text)).toBe(expected)
  })

  it.each([
    'password authentication failed for user "app"',
    'amqp://app@mq:5672 refused the connection',
    'billing database unreachable',
    'ratio=0.5 attempts=3',
  ])('leaves text without a credential alone: %s', (text) => {
    expect(redactCredentials(text)).toBe(text)
  })
})

describe('toHealthJson', () => {
  const result = (details: Record<string, string>): HealthResult => ({
    status: 'DOWN',
    inFlight: 2,
    reports: [{ name: 'db', status: 'DOWN', details }],
  })

  it('writes status first in the body and in each component, then the details in their order', () => {
    const json = toHealthJson(result({ zeta: '1', alpha: '2' }))
    expect(Object.keys(json)).toStrictEqual(['status', 'inFlight', 'components'])
    expect(Object.keys(json.components['db'] ?? {})).toStrictEqual(['status', 'zeta', 'alpha'])
  })

  it("keeps the component's status when a detail is also called status", () => {
    const json = toHealthJson(result({ status: 'UP', other: 'x' }))
    expect(json.components['db']).toStrictEqual({ status: 'DOWN', other: 'x' })
    expect(Object.keys(json.components['db'] ?? {})).toStrictEqual(['status', 'other'])
  })

  it('redacts every detail value, and the whole value of a detail named like a secret', () => {
    const json = toHealthJson(
      result({
        error: 'connect ECONNREFUSED postgres://app:s3cret@db/x',
        dsn: 'host=db password=hunter2',
        password: 'plain',
        apiKey: 'k-123',
      }),
    )
    expect(json.components['db']).toStrictEqual({
      status: 'DOWN',
      error: 'connect ECONNREFUSED postgres://app:***@db/x',
      dsn: 'host=db password=***',
      password: '***',
      apiKey: '***',
    })
  })

  it('healthAnswer serves the redacted, status-first JSON', async () => {
    const answer = await healthAnswer({
      health: async () => result({ error: 'redis://:t0ken@cache' }),
    })
    expect(answer.statusCode).toBe(503)
    expect(JSON.stringify(answer.body)).toBe(
      '{"status":"DOWN","inFlight":2,"components":{"db":{"status":"DOWN","error":"redis://:***@cache"}}}',
    )
  })
})
