import { describe, expect, it } from 'vitest'
import { toHealthJson, type HealthResult } from '../../src/index.js'
import { healthAnswer, redactCredentials } from '../../src/spi.js'

// What an endpoint serves when health() itself fails, and the corners of the redaction that
// the main cases leave open (found by mutation testing, docs/mutation.md).

function failing(error: unknown): { health(): Promise<HealthResult> } {
  return {
    health: () => Promise.reject(error),
  }
}

describe('healthAnswer when health() fails', () => {
  it.each([
    ['an error with a message', new Error('broker gone'), 'broker gone'],
    ['an error without a message, by its name', new RangeError(''), 'RangeError'],
    [
      'an error with neither, by a fixed text',
      Object.assign(new Error(''), { name: '' }),
      'health() failed',
    ],
    ['a thrown string', 'store down', 'store down'],
    ['an empty thrown string, by a fixed text', '', 'health() failed'],
    ['a thrown number, by a fixed text', 42, 'health() failed'],
    ['a thrown undefined, by a fixed text', undefined, 'health() failed'],
  ])('answers 503 DOWN with %s', async (_what, error, message) => {
    const answer = await healthAnswer(failing(error))
    expect(answer.statusCode).toBe(503)
    expect(answer.body).toStrictEqual({ status: 'DOWN', error: message })
    expect(answer.error).toBe(error)
  })

  it('answers with a fixed text when reading the error’s message throws', async () => {
    const error = new Error('x')
    Object.defineProperty(error, 'message', {
      get() {
        throw new Error('no message for you')
      },
    })
    const answer = await healthAnswer(failing(error))
    expect(answer.body).toStrictEqual({ status: 'DOWN', error: 'health() failed' })
  })

  it('redacts a password in the error it serves', async () => {
    const answer = await healthAnswer(failing(new Error('connect amqp://app:s3cret@mq failed')))
    expect(answer.body).toStrictEqual({ status: 'DOWN', error: 'connect amqp://app:***@mq failed' })
  })
})

describe('redaction corners', () => {
  it('hides the password of a URL whose scheme is a single letter', () => {
    expect(redactCredentials('x://user:pw@host')).toBe('x://user:***@host')
  })

  it('leaves a "://" that follows no scheme alone', () => {
    expect(redactCredentials('a ://user:pw@host')).toBe('a ://user:pw@host')
  })

  it('hides every secret JSON field, whatever the case of its name', () => {
    expect(redactCredentials('{"Password":"a","user":"b","TOKEN":"c"}')).toBe(
      '{"Password":"***","user":"b","TOKEN":"***"}',
    )
  })

  it('makes the components plain data: each can be changed or removed by the caller', () => {
    const json = toHealthJson({
      status: 'UP',
      inFlight: 0,
      reports: [{ name: 'connection', status: 'UP', details: { open: 'true' } }],
    })
    expect(Object.getOwnPropertyDescriptor(json.components, 'connection')).toMatchObject({
      enumerable: true,
      writable: true,
      configurable: true,
    })
    expect(Object.getOwnPropertyDescriptor(json.components['connection'], 'open')).toStrictEqual({
      value: 'true',
      enumerable: true,
      writable: true,
      configurable: true,
    })
  })
})
