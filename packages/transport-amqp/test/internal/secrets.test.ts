import { describe, expect, it } from 'vitest'
import { sanitizeError, scrubSecrets } from '../../src/internal/secrets.js'

describe('scrubSecrets', () => {
  it('redacts embedded URLs and every known password, raw or percent-encoded', () => {
    expect(
      scrubSecrets("failed to reach 'amqp://app:s3cret@rabbit:5672' (token s3cret, p@ss)", [
        's3cret',
        'p@ss',
      ]),
    ).toBe("failed to reach 'amqp://app:***@rabbit:5672' (token ***, ***)")
    expect(scrubSecrets('encoded p%40ss here', ['p@ss'])).toBe('encoded *** here')
  })

  it('redacts an embedded URL whose password holds an unescaped ? or #', () => {
    expect(scrubSecrets('cannot reach amqp://app:pa?ss@rabbit:5672/v (refused)', [])).toBe(
      'cannot reach amqp://app:***@rabbit:5672/v (refused)',
    )
    expect(scrubSecrets('cannot reach amqp://app:pa#ss@rabbit', [])).toBe(
      'cannot reach amqp://app:***@rabbit',
    )
  })

  it('ignores empty secrets', () => {
    expect(scrubSecrets('nothing to hide', [''])).toBe('nothing to hide')
  })
})

describe('sanitizeError', () => {
  it('returns an error that mentions no secret unchanged', () => {
    const error = new Error('connect ECONNREFUSED 127.0.0.1:1')
    expect(sanitizeError(error, ['s3cret'])).toBe(error)
  })

  it('replaces an error that mentions a secret by a scrubbed copy with its name and code', () => {
    const error = Object.assign(new TypeError('bad url amqp://u:s3cret@h'), { code: 'E_URL' })
    const safe = sanitizeError(error, ['s3cret']) as Error & { code?: string }
    expect(safe).not.toBe(error)
    expect(safe.name).toBe('TypeError')
    expect(safe.code).toBe('E_URL')
    expect(safe.message).toBe('bad url amqp://u:***@h')
    expect(String(safe.stack)).not.toContain('s3cret')
  })

  it('scrubs a thrown string', () => {
    expect(sanitizeError('oops s3cret', ['s3cret'])).toBe('oops ***')
  })
})
