import { describe, expect, it } from 'vitest'
import { headerGetter, headerSetter } from '../../src/internal/header-carrier.js'
import type { Headers } from '@acemq/core'

describe('the header carrier', () => {
  it('reads strings, Buffers and bytes as text', () => {
    const headers: Headers = {
      a: 'text',
      b: Buffer.from('buffer'),
      c: new Uint8Array([98, 121, 116, 101, 115]),
    }
    expect(headerGetter.get(headers, 'a')).toBe('text')
    expect(headerGetter.get(headers, 'b')).toBe('buffer')
    expect(headerGetter.get(headers, 'c')).toBe('bytes')
  })

  it('reads arrays element by element and skips what is not text', () => {
    expect(headerGetter.get({ a: ['x', Buffer.from('y'), 3] }, 'a')).toEqual(['x', 'y'])
  })

  it('answers undefined for a missing or non-text header', () => {
    expect(headerGetter.get({ n: 7 }, 'n')).toBeUndefined()
    expect(headerGetter.get({}, 'traceparent')).toBeUndefined()
  })

  it('lists the header names and writes plain strings', () => {
    const headers: Headers = { a: 1 }
    headerSetter.set(headers, 'traceparent', 'tp')
    expect(headers).toEqual({ a: 1, traceparent: 'tp' })
    expect(headerGetter.keys(headers)).toEqual(['a', 'traceparent'])
  })
})
